"""The orchestrator worker: the durable turn."""

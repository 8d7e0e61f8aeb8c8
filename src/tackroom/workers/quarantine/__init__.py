"""The ``quarantine`` worker: ``quarantine::extract``, the dual-LLM pattern's quarantined reader."""

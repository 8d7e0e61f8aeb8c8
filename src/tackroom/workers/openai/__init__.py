"""The ``openai`` provider worker (Chat Completions, OpenAI-compatible servers by profile)."""

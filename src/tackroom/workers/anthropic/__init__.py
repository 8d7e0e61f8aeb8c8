"""The ``anthropic`` provider worker (Messages API: tools, thinking, prompt caching)."""

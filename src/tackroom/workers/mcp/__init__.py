"""The ``mcp`` bridge worker: MCP servers' tools, resources and prompts on the bus."""

"""Ways in for agents: the MCP server (and, later, the asyncio API)."""

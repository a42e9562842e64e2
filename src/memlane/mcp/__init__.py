"""``memlane mcp``: the MCP server (official ``mcp`` SDK, 1.x). See :mod:`memlane.mcp.server`."""

"""The offloading MCP proxy: put any existing MCP server behind the store."""

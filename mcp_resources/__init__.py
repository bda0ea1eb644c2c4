"""Everything MCP: the store as MCP resources, upload tools, tool-result helpers, embedding and transports."""

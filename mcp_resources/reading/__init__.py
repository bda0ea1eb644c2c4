"""Reading the store as MCP resources: listing, templates, byte windows and media views."""

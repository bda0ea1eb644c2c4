"""mcp-blobstore: chunked binary transfer and content-addressed resource store for MCP."""

__version__ = "0.1.0"

"""What a connection needs: the low-level server, stdio and streamable HTTP, notifications, SDK internals."""

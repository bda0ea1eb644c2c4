"""The store's tools and artifact URIs in tool arguments: upload and read tools, handles, file parameters."""

"""The HTTP edge: FastAPI app factory, routes and the one error-mapping table."""

from blobstore.api.app import AppExtension, create_app

__all__ = ["AppExtension", "create_app"]

"""Composition root for the server: settings → stores → service → HTTP app with the MCP app mounted at /mcp.

``uvicorn --factory blobstore.asgi:app_from_env`` (or any ASGI server's factory mode) builds the app from
``BLOBSTORE_*`` variables; ``blobstore serve`` calls :func:`build_app` with its flags. Nothing is built at
import.
"""

from __future__ import annotations

from fastapi import FastAPI

from blobstore.config import Settings, load_settings


def build_app(settings: Settings) -> FastAPI:
    from blobstore.api.app import create_app
    from blobstore.api.observe import configure_access_log
    from mcp_resources.transports.http import McpHttpExtension

    configure_access_log(settings.access_log_level)
    return create_app(settings, extensions=[McpHttpExtension(settings)])


def app_from_env() -> FastAPI:
    return build_app(load_settings())

"""``/docs``: Swagger UI over ``/openapi.json`` from files shipped in the package (``swagger/``), not a CDN.

FastAPI's own ``/docs`` page loads Swagger UI from a public CDN (a floating major version, no integrity hash)
and starts it with an inline script: any page of the server's origin then runs whatever that CDN serves. Here
the page, Swagger UI (``swagger-ui-dist``, pinned, see ``swagger/VERSION.md``) and the script that starts it
all come from the package, and every one is sent with the console's headers (a Content-Security-Policy
without inline script or another origin, ``X-Frame-Options: DENY``, ``nosniff``; images may also be ``data:``
URLs, which Swagger UI's stylesheet uses for its icons): :mod:`blobstore.api.page_headers`. It works offline.
"""

from __future__ import annotations

from typing import Final

from fastapi import FastAPI
from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from blobstore.api.page_headers import DOCS_POLICY, fence

DOCS_PATH: Final = "/docs"
ASSETS_PATH: Final = "/docs/assets"

PAGE: Final = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>mcp-blobstore - HTTP API</title>
<link rel="stylesheet" href="{ASSETS_PATH}/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="{ASSETS_PATH}/swagger-ui-bundle.js"></script>
<script src="{ASSETS_PATH}/start.js"></script>
</body>
</html>
"""


class _Fenced:
    """The page headers on every answer of ``app`` (the asset files)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def fenced(message: Message) -> None:
            if message["type"] == "http.response.start":
                fence(MutableHeaders(scope=message), DOCS_POLICY)
            await send(message)

        await self.app(scope, receive, fenced)


async def docs_page(_request: Request) -> HTMLResponse:
    response = HTMLResponse(PAGE, headers={"cache-control": "no-cache"})
    fence(response.headers, DOCS_POLICY)
    return response


def install_docs(app: FastAPI) -> None:
    """``GET /docs`` and its files under ``/docs/assets/`` (the app is made with ``docs_url=None``)."""
    app.add_route(DOCS_PATH, docs_page, methods=["GET", "HEAD"], include_in_schema=False)
    assets = StaticFiles(packages=[("blobstore.api", "swagger")])
    app.mount(ASSETS_PATH, _Fenced(assets), name="api-docs")

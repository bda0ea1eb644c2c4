"""Cross-origin requests from the browser pages of the configured origins (``BLOBSTORE_CORS_ORIGINS``).

Off unless origins are configured; then :class:`Cors` wraps the whole app, ``/mcp`` included:

- A preflight (``OPTIONS`` with ``Origin`` and ``Access-Control-Request-Method``) from a listed origin is
  answered here, before routing and authentication: a preflight never carries credentials (Fetch standard,
  "CORS-preflight request"), and it grants nothing by itself, since the request that follows is authenticated
  as usual.
- Any other request from a listed origin is passed on, and its response (errors included) gets
  ``Access-Control-Allow-Origin`` and the ``Access-Control-Expose-Headers`` that tus, ranged downloads and
  MCP clients read.
- A request from any other origin, or without ``Origin``, is passed on untouched: no CORS headers, so the
  browser keeps the response from the page. A tus discovery ``OPTIONS`` without ``Origin`` therefore reaches
  the tus endpoint as before.

Credentials mode is not offered (no ``Access-Control-Allow-Credentials``): the API authenticates with a bearer
token the page sends in ``Authorization``, never with cookies, so a page must hold a token to act as anyone.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

ALLOWED_METHODS: Final = ("GET", "HEAD", "POST", "PATCH", "PUT", "DELETE", "OPTIONS")

ALLOWED_REQUEST_HEADERS: Final = (
    # Authentication and bodies.
    "Authorization",
    "Content-Type",
    "Content-Disposition",
    "Content-Digest",
    "X-Chunk-XXH3",
    # Ranged and conditional downloads.
    "Range",
    "If-Range",
    "If-None-Match",
    "If-Modified-Since",
    # tus 1.0.0.
    "Tus-Resumable",
    "Upload-Length",
    "Upload-Offset",
    "Upload-Metadata",
    "Upload-Checksum",
    "Upload-Defer-Length",
    "Upload-Concat",
    "X-HTTP-Method-Override",
    "X-Requested-With",
    # MCP streamable HTTP.
    "Mcp-Session-Id",
    "Mcp-Protocol-Version",
    "Last-Event-ID",
    # A page may name its requests for the logs.
    "X-Request-Id",
)
"""Listed one by one: the ``*`` wildcard never covers ``Authorization`` (Fetch standard)."""

EXPOSED_RESPONSE_HEADERS: Final = (
    # tus 1.0.0.
    "Upload-Offset",
    "Upload-Length",
    "Upload-Metadata",
    "Upload-Expires",
    "Upload-Defer-Length",
    "Tus-Resumable",
    "Tus-Version",
    "Tus-Extension",
    "Tus-Max-Size",
    "Tus-Checksum-Algorithm",
    "Location",
    "Link",
    "Blobstore-Artifact-Id",
    # Downloads: ranges, validators, windows.
    "Content-Range",
    "Accept-Ranges",
    "ETag",
    "Content-Length",
    "Content-Disposition",
    "Content-Digest",
    "X-Blobstore-Offset",
    "X-Blobstore-Length",
    "X-Blobstore-Size",
    "X-Blobstore-Eof",
    "X-Blobstore-Next-Offset",
    # Errors and MCP.
    "WWW-Authenticate",
    "Retry-After",
    "Allow",
    "Mcp-Session-Id",
    "Mcp-Protocol-Version",
    # The id that finds a request in the server's logs (also in every error body).
    "X-Request-Id",
)
"""Everything a page reads beyond the CORS-safelisted response headers (Content-Type, Last-Modified, …)."""

PREFLIGHT_MAX_AGE_SECONDS: Final = 600


def _append_vary(headers: MutableHeaders, *names: str) -> None:
    present = {item.strip().lower() for item in headers.get("vary", "").split(",") if item.strip()}
    for name in names:
        if name.lower() not in present:
            headers.add_vary_header(name)
            present.add(name.lower())


class Cors:
    """ASGI middleware answering preflights and stamping CORS headers for the listed origins only."""

    def __init__(self, app: ASGIApp, *, origins: Iterable[str]) -> None:
        self.app = app
        self.origins = frozenset(origins)
        self._preflight_headers = {
            "Access-Control-Allow-Methods": ", ".join(ALLOWED_METHODS),
            "Access-Control-Allow-Headers": ", ".join(ALLOWED_REQUEST_HEADERS),
            "Access-Control-Max-Age": str(PREFLIGHT_MAX_AGE_SECONDS),
        }
        self._expose = ", ".join(EXPOSED_RESPONSE_HEADERS)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        origin = headers.get("origin")
        allowed = origin if origin is not None and origin in self.origins else None
        preflight = scope["method"] == "OPTIONS" and "access-control-request-method" in headers
        if allowed is not None and preflight:
            await self._preflight(allowed)(scope, receive, send)
            return

        async def stamped(message: Message) -> None:
            if message["type"] == "http.response.start":
                response_headers = MutableHeaders(scope=message)
                if allowed is not None:
                    response_headers["Access-Control-Allow-Origin"] = allowed
                    response_headers["Access-Control-Expose-Headers"] = self._expose
                # The answer depends on Origin whoever asks: shared caches must not mix them up.
                _append_vary(response_headers, "Origin")
            await send(message)

        await self.app(scope, receive, stamped)

    def _preflight(self, origin: str) -> Response:
        response = Response(status_code=204, headers=self._preflight_headers)
        response.headers["Access-Control-Allow-Origin"] = origin
        _append_vary(
            response.headers, "Origin", "Access-Control-Request-Method", "Access-Control-Request-Headers"
        )
        return response

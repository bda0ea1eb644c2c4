"""The console's two middlewares: the bridge from the cookie to the API, and the security headers.

:class:`ConsoleBridge` answers ``/console/api/v1/…`` as ``/v1/…`` with the session cookie turned into the
``Authorization`` header: the console's pages use the API itself (chunked uploads, the content route with its
ranges and conditional requests) with exactly the token's rights, while the token stays in an ``HttpOnly``
cookie that the page's script never sees. A change through it needs the CSRF header.

:class:`ConsoleHeaders` puts a strict Content-Security-Policy (no inline script or style, nothing from another
origin, no framing) and ``nosniff`` on every console page and file.
"""

from __future__ import annotations

from typing import Final

from starlette.datastructures import MutableHeaders
from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from blobstore.api.console.session import (
    CSRF_HEADER,
    LoginRequired,
    check_csrf,
    clear_session_cookies,
    cookie_policy,
    open_session,
)
from blobstore.api.deps import SESSION_CALLER
from blobstore.api.errors import error_response
from blobstore.api.page_headers import PAGE_POLICY, fence
from blobstore.errors import BlobstoreError, Unauthorized

BRIDGE_PREFIX: Final = "/console/api"
_SAFE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})

CONTENT_POLICY: Final = "sandbox; default-src 'none'"
"""For bytes of an artifact: nothing in them runs, even when a browser is made to open them."""


class ConsoleBridge:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "") if scope["type"] == "http" else ""
        if not path.startswith(BRIDGE_PREFIX + "/v1/"):
            await self.app(scope, receive, send)
            return
        connection = HTTPConnection(scope)
        try:
            session = await open_session(connection)
            if scope["method"] not in _SAFE_METHODS:
                check_csrf(session, connection.headers.get(CSRF_HEADER))
        except LoginRequired as exc:
            refused = error_response(Unauthorized("log in to the console: no live console session"))
            if exc.clear:
                clear_session_cookies(refused, cookie_policy(connection), exc.clear)
            await refused(scope, receive, send)
            return
        except BlobstoreError as exc:
            await error_response(exc)(scope, receive, send)
            return
        inner = dict(scope)
        inner["path"] = path.removeprefix(BRIDGE_PREFIX)
        inner["raw_path"] = inner["path"].encode("latin-1")
        # The API sees the session's caller, and neither the cookie nor any Authorization the page sent.
        inner["headers"] = [
            (name, value) for name, value in scope["headers"] if name not in {b"cookie", b"authorization"}
        ]
        inner[SESSION_CALLER] = session.caller
        try:
            await self.app(inner, receive, send)
        finally:
            # The API route that answered, for the access line and the metrics' bounded route label.
            if "route" in inner:
                scope["route"] = inner["route"]


def _policy_for(path: str) -> str | None:
    if path.startswith(BRIDGE_PREFIX + "/") or path.startswith("/share/"):
        return CONTENT_POLICY
    if path == "/console" or path.startswith("/console/"):
        return PAGE_POLICY
    return None


class ConsoleHeaders:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        policy = _policy_for(scope.get("path", "")) if scope["type"] == "http" else None
        if policy is None:
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                # The content route sets its own (a sandbox); a page gets the console's.
                fence(headers, policy)
                html = headers.get("content-type", "").startswith("text/html")
                if html and "cache-control" not in headers:
                    headers["cache-control"] = "no-store"
            await send(message)

        await self.app(scope, receive, send_with_headers)

"""The console's two middlewares: the bridge from the cookie to the API, and the security headers.

:class:`ConsoleBridge` answers ``/console/api/v1/…`` as ``/v1/…`` with the session cookie turned into the
``Authorization`` header: the console's pages use the API itself (chunked uploads, the content route with its
ranges and conditional requests) with exactly the token's rights, while the token stays in an ``HttpOnly``
cookie that the page's script never sees. A change through it needs the CSRF header.

:class:`ConsoleHeaders` puts a strict Content-Security-Policy (no inline script or style, nothing from another
origin, no framing) and ``nosniff`` on every console page and file.
"""

from __future__ import annotations

from collections.abc import Mapping
from http.cookies import SimpleCookie
from typing import Final

from starlette.datastructures import Headers, MutableHeaders
from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from blobstore.api.console.session import COOKIE_NAME, CSRF_HEADER, authorization_for, check_csrf
from blobstore.api.console.state import console_state
from blobstore.api.errors import error_response
from blobstore.errors import BlobstoreError, CsrfRejected

BRIDGE_PREFIX: Final = "/console/api"
_SAFE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})

PAGE_POLICY: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; media-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
CONTENT_POLICY: Final = "sandbox; default-src 'none'"
"""For bytes of an artifact: nothing in them runs, even when a browser is made to open them."""


def _cookie(headers: Headers) -> str | None:
    jar: SimpleCookie = SimpleCookie()
    for value in headers.getlist("cookie"):
        try:
            jar.load(value)
        except Exception:  # noqa: S112 - a malformed cookie header is as good as none
            continue
    morsel = jar.get(COOKIE_NAME)
    return morsel.value if morsel is not None and morsel.value else None


class ConsoleBridge:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "") if scope["type"] == "http" else ""
        if not path.startswith(BRIDGE_PREFIX + "/v1/"):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        cookie = _cookie(headers)
        if scope["method"] not in _SAFE_METHODS:
            try:
                if cookie is None:
                    raise CsrfRejected()
                await check_csrf(
                    console_state(scope["app"]), HTTPConnection(scope), cookie, headers.get(CSRF_HEADER)
                )
            except BlobstoreError as exc:
                await error_response(exc)(scope, receive, send)
                return
        inner = dict(scope)
        inner["path"] = path.removeprefix(BRIDGE_PREFIX)
        inner["raw_path"] = inner["path"].encode("latin-1")
        kept = [
            (name, value) for name, value in scope["headers"] if name not in {b"cookie", b"authorization"}
        ]
        authorization = authorization_for(cookie) if cookie is not None else None
        if authorization is not None:
            kept.append((b"authorization", authorization.encode("latin-1")))
        inner["headers"] = kept
        await self.app(inner, receive, send)


def _policy_for(path: str) -> str | None:
    if path.startswith(BRIDGE_PREFIX + "/") or path.startswith("/share/"):
        return CONTENT_POLICY
    if path == "/console" or path.startswith("/console/"):
        return PAGE_POLICY
    return None


_STATIC_HEADERS: Final[Mapping[str, str]] = {
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    # Not no-referrer: under it a browser sends "Origin: null" with its own forms, which look foreign then.
    "referrer-policy": "same-origin",
    "cross-origin-opener-policy": "same-origin",
}


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
                if "content-security-policy" not in headers:
                    headers["content-security-policy"] = policy
                for name, value in _STATIC_HEADERS.items():
                    headers[name] = value
                html = headers.get("content-type", "").startswith("text/html")
                if html and "cache-control" not in headers:
                    headers["cache-control"] = "no-store"
            await send(message)

        await self.app(scope, receive, send_with_headers)

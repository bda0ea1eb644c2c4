"""One guard in front of every route (the HTTP API, the console, share links, tus and ``/mcp``): whose
forwarded headers count, which ``Host`` names the server answers to, and which pages may change anything.

In this order, before any route runs (``blobstore.web_origins`` holds the rules):

1. **Forwarded headers.** From a peer in ``BLOBSTORE_FORWARDED_ALLOW_IPS`` (loopback by default), the last
   ``X-Forwarded-Proto`` becomes the request's scheme, the last ``X-Forwarded-Host`` its ``Host`` and the
   client that ``X-Forwarded-For`` names its client address, for every part of the app alike (links, the
   console's ``Secure`` cookie, local mode's loopback check, the access log). From any other peer they are
   ignored. ``blobstore serve`` turns the ASGI servers' own handling off, so granian and uvicorn behave the
   same.
2. **Host.** A ``Host`` that names none of the server's names is ``421 host_not_allowed``: a page that rebinds
   its own DNS name to this server's address (DNS rebinding) gets nothing, since its browser sends that name.
3. **Origin.** A request that changes something (any method but ``GET``, ``HEAD`` and ``OPTIONS``; on
   ``/mcp`` every method, as the MCP specification asks servers to "validate the Origin header on all incoming
   connections") is ``403 cross_origin_refused`` when it carries an ``Origin`` other than the server's own
   (the request's scheme and host, or ``BLOBSTORE_PUBLIC_URL``'s) or one of ``BLOBSTORE_CORS_ORIGINS``, or,
   without ``Origin``, a ``Sec-Fetch-Site`` other than ``same-origin`` or ``none``. Browsers send those
   headers on their own and a page cannot forge them; curl, the SDKs and tus clients send neither and pass.

A request without ``Host`` (HTTP/1.0) names nothing to rebind and passes the host check.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from starlette.types import ASGIApp, Receive, Scope, Send

from blobstore import metrics
from blobstore.api.errors import error_response
from blobstore.config import Settings
from blobstore.errors import BlobstoreError, CrossOriginRefused, HostNotAllowed
from blobstore.web_origins import (
    TrustedPeers,
    allowed_origins,
    host_allow_list,
    last_value,
    request_origin,
    split_host,
)

SAFE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})
SAME_SITE_FETCHES: Final = frozenset({b"same-origin", b"none"})
"""``Sec-Fetch-Site`` values of a request the user made or a page of this origin made (Fetch Metadata)."""
_SHOWN_MAX: Final = 255
_REMEMBERED_HOSTS: Final = 64


class RequestGuard:
    """ASGI middleware applying the rules above; ``every_method_paths`` are checked for ``Origin`` whatever
    the method (the MCP endpoint)."""

    def __init__(self, app: ASGIApp, *, settings: Settings, every_method_paths: Iterable[str] = ()) -> None:
        self.app = app
        self.hosts = host_allow_list(settings)
        self.origins = allowed_origins(settings)
        self.peers = TrustedPeers(settings.forwarded_allow_ips)
        self.every_method_paths = tuple(every_method_paths)
        # The verdict per Host value: a server hears the same few names again and again. Bounded, so that
        # a client sending random names cannot grow it.
        self._verdicts: dict[bytes, bool] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(scope)
        if refusal is not None:
            metrics.count_error(refusal.code)
            await error_response(refusal)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def refusal(self, scope: Scope) -> BlobstoreError | None:
        """Why this request goes no further (a foreign ``Host``, a change sent by another origin), else None;
        a trusted proxy's forwarded scheme, host and client are applied to ``scope`` on the way."""
        host = origin = fetch_site = None
        forwarded = False
        for name, value in scope["headers"]:
            if name == b"host":
                host = value
            elif name == b"origin":
                origin = value
            elif name == b"sec-fetch-site":
                fetch_site = value
            elif name.startswith(b"x-forwarded-"):
                forwarded = True
        if forwarded:
            client = scope.get("client")
            if self.peers.trusts(client[0] if client else None):
                host = self._apply_forwarded(scope, host)
        try:
            if host is not None and not self._host_allowed(host):
                shown = host.decode("latin-1")[:_SHOWN_MAX]
                raise HostNotAllowed(
                    f"this server does not answer to {shown!r}: name it in BLOBSTORE_ALLOWED_HOSTS "
                    "or BLOBSTORE_PUBLIC_URL",
                    host=shown,
                )
            if (origin is not None or fetch_site is not None) and self._checks_origin(scope):
                self._check_origin(scope, host, origin, fetch_site)
        except BlobstoreError as exc:
            return exc
        return None

    def _host_allowed(self, host: bytes) -> bool:
        verdict = self._verdicts.get(host)
        if verdict is None:
            verdict = self.hosts.allows_header(host.decode("latin-1"))
            if len(self._verdicts) >= _REMEMBERED_HOSTS:
                self._verdicts.clear()
            self._verdicts[host] = verdict
        return verdict

    def _checks_origin(self, scope: Scope) -> bool:
        if scope["method"] not in SAFE_METHODS:
            return True
        path: str = scope["path"]
        return any(path == prefix or path.startswith(prefix + "/") for prefix in self.every_method_paths)

    def _check_origin(
        self, scope: Scope, host: bytes | None, origin: bytes | None, fetch_site: bytes | None
    ) -> None:
        if origin is None:
            if fetch_site is not None and fetch_site.strip().lower() not in SAME_SITE_FETCHES:
                raise CrossOriginRefused(
                    "the browser says a page of another site sent this request (Sec-Fetch-Site)",
                    sec_fetch_site=fetch_site.decode("latin-1")[:_SHOWN_MAX],
                )
            return
        text = origin.decode("latin-1").strip().lower()
        if text in self.origins:
            return
        if host is not None and text == request_origin(scope["scheme"], host.decode("latin-1")):
            return
        raise CrossOriginRefused(
            "only pages of this server's own origin or of BLOBSTORE_CORS_ORIGINS may change anything",
            origin=text[:_SHOWN_MAX],
        )

    def _apply_forwarded(self, scope: Scope, host: bytes | None) -> bytes | None:
        """Take a trusted proxy's word for the scheme, host and client; the new ``Host`` is returned."""
        proto = forwarded_host = forwarded_for = None
        for name, value in scope["headers"]:
            if name == b"x-forwarded-proto":
                proto = value
            elif name == b"x-forwarded-host":
                forwarded_host = value
            elif name == b"x-forwarded-for":
                forwarded_for = value
        if proto is not None:
            scheme = last_value(proto.decode("latin-1")).lower()
            if scheme in {"http", "https"}:
                scope["scheme"] = scheme
        if forwarded_for is not None:
            client = self.peers.client(forwarded_for.decode("latin-1"))
            if client is not None:
                scope["client"] = (client, 0)
        if forwarded_host is not None:
            named = last_value(forwarded_host.decode("latin-1"))
            if split_host(named) is not None:
                host = named.encode("latin-1")
                scope["headers"] = [(name, value) for name, value in scope["headers"] if name != b"host"]
                scope["headers"].append((b"host", host))
        return host

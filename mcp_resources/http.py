"""Streamable HTTP at ``/mcp``, mounted in the same ASGI app as the HTTP API.

:class:`McpHttpExtension` satisfies the API's ``AppExtension`` protocol: ``app`` is a plain ASGI callable (it
answers on whatever path the host routes to it) and ``lifespan(service)`` builds the MCP server for the opened
service and runs the SDK's session manager for as long as the host app lives (a mounted sub-application's own
lifespan never runs). The manager is stateless, so any replica can answer any request of either protocol era;
the request-body limit admits an upload chunk of up to twice the chunk limit (base64) plus the JSON around it,
so that a chunk over the limit reaches the tool and gets its ``limit_exceeded`` tool error, and a body past
even that is refused with a JSON-RPC error of the same code (never the SDK's ``text/plain`` 413);
DNS-rebinding protection checks ``Host``/``Origin`` against the configured addresses.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any, Final
from urllib.parse import urlsplit

from mcp.server import ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE, TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from blobstore.api.errors import error_response
from blobstore.auth import Authenticator, authenticator_for
from blobstore.config import Settings
from blobstore.errors import LimitExceeded, Unauthorized
from blobstore.models import Caller
from blobstore.service import ArtifactService
from mcp_resources.errors import to_mcp_error
from mcp_resources.server import create_server

MCP_PATH: Final = "/mcp"
CALLER_STATE_KEY: Final = "blobstore.caller"
JSON_ENVELOPE_BYTES: Final = 64 * 1024
_LOOPBACK_HOSTS: Final = ("127.0.0.1", "localhost", "[::1]")
_WILDCARD_HOSTS: Final = ("0.0.0.0", "::", "")


def caller_for_request(request: Request | None, settings: Settings) -> Caller:
    """The principal an MCP-over-HTTP request acts as: the one the endpoint authenticated from its bearer
    token (or local mode) before the SDK saw the request. Without one, nobody: fail closed.
    """
    found = request.scope.get("state", {}).get(CALLER_STATE_KEY) if request is not None else None
    if not isinstance(found, Caller):
        raise Unauthorized()
    return found


def max_request_body(settings: Settings) -> int:
    """Room for an upload chunk of twice the chunk limit as base64 plus its JSON-RPC envelope, and never below
    the SDK default: a client that sends chunks somewhat too large gets the tool's ``limit_exceeded`` with the
    limit to use, rather than a transport refusal it cannot act on.
    """
    chunk_b64 = 4 * -(-(2 * settings.mcp_chunk_max) // 3)
    return max(DEFAULT_MAX_REQUEST_BODY_SIZE, chunk_b64 + JSON_ENVELOPE_BYTES)


class _BodyTooLarge(Exception):
    pass


def _too_large(settings: Settings) -> LimitExceeded:
    limit = max_request_body(settings)
    return LimitExceeded(
        f"an MCP request body may carry at most {limit} bytes, and a chunk sent over MCP at most "
        f"{settings.mcp_chunk_max} bytes",
        max_chunk=settings.mcp_chunk_max,
        max_body=limit,
    )


async def _refuse_as_jsonrpc(exc: LimitExceeded, scope: Scope, receive: Receive, send: Send) -> None:
    """413 with a JSON-RPC error body: the request's id is unknown before its body is read, so it is null (the
    SDK client answers the pending request with it)."""
    error = to_mcp_error(exc)
    body = {"jsonrpc": "2.0", "id": None, "error": error.error.model_dump(mode="json", exclude_none=True)}
    response = Response(json.dumps(body), status_code=413, media_type="application/json")
    await response(scope, receive, send)


def _declared_length(scope: Scope) -> int | None:
    """``Content-Length``; the API's body guard has refused a malformed one before this app runs."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length" and value.isdigit():
            return int(value)
    return None


def transport_security(settings: Settings) -> TransportSecuritySettings:
    """Accept ``Host``/``Origin`` only for the addresses this server is reached at (DNS-rebinding protection).

    Loopback names are always allowed; the bind host and the public URL's host are added. A server bound to
    all interfaces without a public URL cannot know its names, so only then the check is left off (such a
    server requires bearer tokens anyway).
    """
    hosts = [f"{name}:*" for name in _LOOPBACK_HOSTS] + list(_LOOPBACK_HOSTS)
    origins = [f"http://{name}:*" for name in _LOOPBACK_HOSTS] + [
        f"http://{name}" for name in _LOOPBACK_HOSTS
    ]
    bind = settings.host.strip("[]")
    if bind not in _WILDCARD_HOSTS:
        shown = f"[{bind}]" if ":" in bind else bind
        hosts += [shown, f"{shown}:*"]
        origins += [f"http://{shown}:*", f"https://{shown}:*", f"http://{shown}", f"https://{shown}"]
    if settings.public_url:
        public = urlsplit(settings.public_url)
        if public.netloc:
            hosts += [public.netloc, f"{public.hostname}:*"]
            origins += [f"{public.scheme}://{public.netloc}"]
    elif bind in _WILDCARD_HOSTS:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


class McpHttpExtension:
    """The MCP streamable-HTTP endpoint as an extension of the HTTP API app."""

    path: str = MCP_PATH

    def __init__(
        self,
        settings: Settings,
        *,
        caller_for: Callable[[Request | None, Settings], Caller] = caller_for_request,
    ) -> None:
        self.settings = settings
        self.caller_for = caller_for
        self._manager: StreamableHTTPSessionManager | None = None
        self._auth: Authenticator | None = None
        self._endpoint = _Endpoint(self)

    def _resolve(self, ctx: ServerRequestContext[Any, Any]) -> Caller:
        request = ctx.request if isinstance(ctx.request, Request) else None
        return self.caller_for(request, self.settings)

    @property
    def app(self) -> ASGIApp:
        return self._endpoint

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        manager, auth = self._manager, self._auth
        if manager is None or auth is None:
            raise RuntimeError(
                "the MCP session manager is not running: enter McpHttpExtension.lifespan() first"
            )
        # Authenticate before the SDK reads a byte, so a request without a valid token costs nothing more.
        client = scope.get("client")
        try:
            caller = await auth.authenticate(
                Request(scope).headers.get("authorization"), client_host=client[0] if client else None
            )
        except Unauthorized as exc:
            await error_response(exc)(scope, receive, send)
            return
        scope.setdefault("state", {})[CALLER_STATE_KEY] = caller
        limit = max_request_body(self.settings)
        declared = _declared_length(scope)
        if declared is not None and declared > limit:
            await _refuse_as_jsonrpc(_too_large(self.settings), scope, receive, send)
            return
        received = 0
        started = False

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise _BodyTooLarge()
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            # The SDK reads the whole body before it answers, so a body past the limit ends here unanswered.
            await manager.handle_request(scope, counted, watched)
        except _BodyTooLarge:
            if started:
                raise
            await _refuse_as_jsonrpc(_too_large(self.settings), scope, receive, send)

    @contextlib.asynccontextmanager
    async def lifespan(self, service: ArtifactService) -> AsyncIterator[None]:
        # Stateless: a handshake-era request has no session to remember a subscription in and no stream to
        # push on, so only 2026-07-28 listen streams (each the response of its own request) get notifications.
        server = create_server(service, caller_for=self._resolve, session_subscriptions=False)
        manager = StreamableHTTPSessionManager(
            app=server,
            stateless=True,
            security_settings=transport_security(self.settings),
            max_request_body_size=max_request_body(self.settings),
        )
        async with manager.run():
            self._manager = manager
            self._auth = authenticator_for(service)
            try:
                yield
            finally:
                self._manager = None
                self._auth = None


class _Endpoint:
    """An ASGI object rather than a bound method, so a host may use it as a ``Route`` endpoint or mount it."""

    def __init__(self, extension: McpHttpExtension) -> None:
        self.extension = extension

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.extension._serve(scope, receive, send)

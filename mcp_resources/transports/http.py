"""Streamable HTTP at ``/mcp``, mounted in the same ASGI app as the HTTP API.

:class:`McpHttpExtension` satisfies the API's ``AppExtension`` protocol: ``app`` is a plain ASGI callable (it
answers on whatever path the host routes to it) and ``lifespan(service)`` builds the MCP server for the opened
service and runs the SDK's session manager for as long as the host app lives (a mounted sub-application's own
lifespan never runs). The manager is stateless, so any replica can answer any request of either protocol era;
the request-body limit admits an upload chunk of up to twice the chunk limit (base64) plus the JSON around it,
so that a chunk over the limit reaches the tool and gets its ``limit_exceeded`` tool error, and a body past
even that is refused with a JSON-RPC error of the same code (never the SDK's ``text/plain`` 413);
DNS-rebinding protection (``Host`` and ``Origin``) is the API app's request guard, which stands in front of
``/mcp`` as of every other route (``blobstore.api.request_guard``, one set of names and origins for the whole
server), so the SDK's own check is off; the app's CORS middleware answers the ``BLOBSTORE_CORS_ORIGINS``
pages' preflights and stamps the CORS headers, here as everywhere.

Answers are plain JSON (``application/json``, a legal streamable-HTTP response to a client that accepts both
types) unless the request needs a stream: a call of a tool that reports progress with a progress token, or a
``subscriptions/listen``. Handshake-era answers would otherwise all be server-sent events, and the official
clients cap one event (the Python SDK at 1 MiB by default), which a full 1 MiB window as base64 exceeds.
A handshake-era ``notifications/cancelled`` reaches the call it names through
:mod:`~mcp_resources.transports.http_cancels`.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any, Final

from mcp.server import ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE, TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from blobstore.auth import Authenticator
from blobstore.config import Settings
from blobstore.errors import BlobstoreError, LimitExceeded, Unauthorized
from blobstore.models import Caller
from blobstore.runtime import Runtime
from mcp_resources.errors import to_mcp_error
from mcp_resources.reading.views import asks_for_a_view
from mcp_resources.tools.tools import PROGRESS_TOOLS
from mcp_resources.transports.http_cancels import RunningCalls
from mcp_resources.transports.server import create_server

MCP_PATH: Final = "/mcp"
CALLER_STATE_KEY: Final = "blobstore.caller"
PROBLEM_TYPE_PREFIX: Final = "urn:blobstore:problem:"
BEARER_CHALLENGE: Final = 'Bearer realm="blobstore"'
_REFUSAL_STATUS: Final = {"limit_exceeded": 413, "too_large": 413, "request_timeout": 408}
JSON_ENVELOPE_BYTES: Final = 64 * 1024


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


def _too_large(settings: Settings) -> LimitExceeded:
    limit = max_request_body(settings)
    return LimitExceeded(
        f"an MCP request body may carry at most {limit} bytes, and a chunk sent over MCP at most "
        f"{settings.mcp_chunk_max} bytes",
        max_chunk=settings.mcp_chunk_max,
        max_body=limit,
    )


def _refused_as_jsonrpc(exc: BlobstoreError) -> Response:
    """A JSON-RPC error body with an HTTP error status (413 too large, 408 stalled): the request's id is
    unknown before its body is read, so it is null (the SDK client answers the pending request with it)."""
    error = to_mcp_error(exc)
    body = {"jsonrpc": "2.0", "id": None, "error": error.error.model_dump(mode="json", exclude_none=True)}
    status = _REFUSAL_STATUS.get(exc.code, 400)
    return Response(json.dumps(body), status_code=status, media_type="application/json")


def _unauthorized(exc: Unauthorized) -> Response:
    """401 before any JSON-RPC is read, as the SDK's own bearer-auth middleware answers it, but as the same
    ``application/problem+json`` object (``code: unauthorized``) the rest of the server sends for a refused
    token, so a client reads one shape whichever path it called.
    """
    body = {"type": PROBLEM_TYPE_PREFIX + exc.code, "title": Unauthorized.default_message, "status": 401}
    body["code"] = exc.code
    if exc.message != exc.default_message:
        body["detail"] = exc.message
    return JSONResponse(
        body,
        status_code=401,
        headers={"WWW-Authenticate": BEARER_CHALLENGE},
        media_type="application/problem+json",
    )


def _declared_length(scope: Scope) -> int | None:
    """``Content-Length``; the API's body guard has refused a malformed one before this app runs."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length" and value.isdigit():
            return int(value)
    return None


TRANSPORT_SECURITY: Final = TransportSecuritySettings(enable_dns_rebinding_protection=False)
"""Off: the host app's request guard checks ``Host`` and ``Origin`` before this endpoint runs (a second,
different list here would only disagree with it)."""


def needs_event_stream(body: bytes) -> bool:
    """Whether the JSON-RPC message in ``body`` gets notifications before its answer, so that the answer
    must be an event stream: a ``subscriptions/listen``, or a call that carries a progress token of
    ``upload_commit`` or of ``read_artifact`` with view arguments (whose answer then fits one event:
    :data:`~mcp_resources.tools.tools.EVENT_BUDGET`). Anything else (even a body that does not parse: the SDK
    answers it) is JSON: a window, and a ``resources/read`` (a whole 30 s segment is over the event cap of
    the official clients), whose progress only stdio and the proxy carry.
    """
    if b"progressToken" not in body and b"subscriptions/listen" not in body:
        return False  # the common case, decided without parsing a multi-MiB upload chunk
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return False
    if not isinstance(message, dict):
        return False
    if message.get("method") == "subscriptions/listen":
        return True
    params = message.get("params")
    if message.get("method") != "tools/call" or not isinstance(params, dict):
        return False
    meta = params.get("_meta")
    if not isinstance(meta, dict) or meta.get("progressToken") is None:
        return False
    name, arguments = params.get("name"), params.get("arguments")
    if name == "read_artifact":
        return isinstance(arguments, dict) and asks_for_a_view(arguments)
    return name in PROGRESS_TOOLS


async def _read_body(receive: Receive, limit: int) -> tuple[list[Message], bytes | None]:
    """The request's first messages up to a complete body of at most ``limit`` bytes: the messages (to hand
    on unchanged) and the body, or ``None`` when it is larger or the client went away (the SDK answers those).
    """
    messages: list[Message] = []
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return messages, None
        part = message.get("body", b"")
        parts.append(part)
        size += len(part)
        if size > limit:
            return messages, None
        if not message.get("more_body", False):
            return messages, b"".join(parts)


def _replaying(messages: list[Message], receive: Receive) -> Receive:
    pending = list(messages)

    async def replay() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replay


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
        self._json_manager: StreamableHTTPSessionManager | None = None
        self._auth: Authenticator | None = None
        self._endpoint = _Endpoint(self)
        self._calls = RunningCalls()

    def _resolve(self, ctx: ServerRequestContext[Any, Any]) -> Caller:
        request = ctx.request if isinstance(ctx.request, Request) else None
        return self.caller_for(request, self.settings)

    @property
    def app(self) -> ASGIApp:
        return self._endpoint

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        manager, json_manager, auth = self._manager, self._json_manager, self._auth
        if manager is None or json_manager is None or auth is None:
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
            await _unauthorized(exc)(scope, receive, send)
            return
        scope.setdefault("state", {})[CALLER_STATE_KEY] = caller
        if scope.get("method") != "POST":
            await manager.handle_request(scope, receive, send)
            return
        limit = max_request_body(self.settings)
        declared = _declared_length(scope)
        if declared is not None and declared > limit:
            await _refused_as_jsonrpc(_too_large(self.settings))(scope, receive, send)
            return
        try:
            messages, body = await _read_body(receive, limit)
        except BlobstoreError as exc:  # the API's body guard gave up on the body (request_timeout, too_large)
            await _refused_as_jsonrpc(exc)(scope, receive, send)
            return
        if body is None and messages[-1]["type"] == "http.request":
            # Past the limit without a Content-Length: a JSON-RPC error, never the SDK's text/plain 413.
            await _refused_as_jsonrpc(_too_large(self.settings))(scope, receive, send)
            return
        chosen = manager if body is None or needs_event_stream(body) else json_manager
        self._calls.cancel(caller, body)
        with self._calls.running(caller, body):
            await chosen.handle_request(scope, _replaying(messages, receive), send)

    @contextlib.asynccontextmanager
    async def lifespan(self, runtime: Runtime) -> AsyncIterator[None]:
        # Stateless: a handshake-era request has no session to remember a subscription in and no stream to
        # push on, so only 2026-07-28 listen streams (each the response of its own request) get notifications.
        server = create_server(runtime.service, caller_for=self._resolve, session_subscriptions=False)
        managers = [
            StreamableHTTPSessionManager(
                app=server,
                stateless=True,
                json_response=json_response,
                security_settings=TRANSPORT_SECURITY,
                max_request_body_size=max_request_body(self.settings),
            )
            for json_response in (False, True)
        ]
        async with managers[0].run(), managers[1].run():
            self._manager, self._json_manager = managers
            self._auth = runtime.authenticator
            try:
                yield
            finally:
                self._manager = self._json_manager = None
                self._auth = None


class _Endpoint:
    """An ASGI object rather than a bound method, so a host may use it as a ``Route`` endpoint or mount it."""

    def __init__(self, extension: McpHttpExtension) -> None:
        self.extension = extension

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.extension._serve(scope, receive, send)

"""``resources/read`` of store URIs on a handshake-era stdio connection, answered beside the SDK's dispatcher.

Through the SDK, one read on stdio costs far more than the read itself: a relay task and a memory stream
between the transport and the dispatcher, a task with its cancel scope, a request context and session, the
middleware chain, the params validated twice and the result dumped, re-validated against the version's schema
and dumped again. Most of the CPU of a 4 KiB read went there. :class:`HandshakeReads` answers the plain form
of the request (``{"jsonrpc": "2.0", "id": …, "method": "resources/read", "params": {"uri": "blobstore://…"}}``)
itself once the connection is known to be a handshake-era one whose ``initialize`` was answered, with the same
handler code, the same error mapping, the same metrics and the same bytes on the wire (a test compares them
with the SDK's for every handshake version). Anything else goes to the SDK as before: the 2026-07-28 era,
requests with ``_meta`` (progress tokens, trace context), other URIs, a connection before or during an
``initialize``, a server with middleware or a read handler other than the store's own, and any process with
an OpenTelemetry tracer provider set (the SDK's span per request stays).

What the SDK's dispatcher does for a request, this does the same way: each read runs in a task of its own, a
``notifications/cancelled`` naming it interrupts it and leaves it unanswered (the notification still reaches
the SDK), and at the end of the input a read still running is cancelled and answered "Connection closed".
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import anyio
from anyio.abc import TaskGroup
from mcp.server import Server
from mcp.shared.dispatcher import as_request_id, coerce_request_id
from mcp.shared.exceptions import MCPError
from mcp.types import (
    CONNECTION_CLOSED,
    PROTOCOL_VERSION_META_KEY,
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
)
from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS
from opentelemetry import trace

from blobstore import metrics
from blobstore.models import Caller
from mcp_resources.metrics import RequestMetrics
from mcp_resources.reading.resources import StoreResources
from mcp_resources.results.wire_blobs import Splices
from mcp_resources.transports.notifications import StoreNotifications, advertise_list_changed
from mcp_resources.uris import is_store_uri

logger = logging.getLogger("mcp_resources.stdio_reads")

METHOD: Final = "resources/read"
_MARK: Final = b'"resources/read"'
"""Only lines holding this are parsed here; every other line goes to the SDK unread."""
_CLOSE_WRITE_SECONDS: Final = 1.0
"""How long the "Connection closed" answer of a read cancelled at the end of the input may wait for the pipe
(the SDK's own bound for the same answer)."""


class Sender(Protocol):
    """Where answers go: one whole line (its line end included), given in parts, at a time."""

    async def send_parts(self, parts: list[bytes]) -> None: ...


@dataclass(slots=True)
class _Read:
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    cancelled: bool = False


@dataclass(frozen=True, slots=True)
class _Uri:
    uri: str


def _plain_read(message: object) -> tuple[RequestId, str] | None:
    """The id and URI of a ``resources/read`` request in its plain form, else None."""
    if not isinstance(message, dict) or len(message) != 4 or message.get("jsonrpc") != "2.0":
        return None
    if message.get("method") != METHOD:
        return None
    params = message.get("params")
    if not isinstance(params, dict) or len(params) != 1:
        return None
    uri = params.get("uri")
    request_id = message.get("id")
    # Store URIs are ASCII; anything else (a lone surrogate escape, say) is left to the SDK's parser.
    if not isinstance(uri, str) or not uri.isascii() or not is_store_uri(uri):
        return None
    if isinstance(request_id, str):
        return (request_id, uri) if request_id.isascii() else None
    if isinstance(request_id, int) and not isinstance(request_id, bool) and -(2**63) <= request_id < 2**63:
        return request_id, uri
    return None


def _tracing() -> bool:
    """Whether a tracer provider is set (the SDK then records a span per request: leave reads to it)."""
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def store_layers_only(server: Server[Any], resources: StoreResources) -> bool:
    """Whether ``server`` is the store's own stdio server: the SDK's default middleware, then exactly the
    store's (session feeds, ``listChanged``, request metrics), and the store's read handler."""
    layers = list(server.middleware)
    # The SDK's own middleware on every server (its OpenTelemetry span), by type.
    sdk_defaults = tuple(type(layer) for layer in Server("probe").middleware)
    defaults = len(sdk_defaults)
    if tuple(type(layer) for layer in layers[:defaults]) != sdk_defaults or len(layers) != defaults + 3:
        return False
    feeds, list_changed, request_metrics = layers[defaults:]
    if getattr(feeds, "__func__", None) is not StoreNotifications.track_sessions:
        return False
    if list_changed is not advertise_list_changed or not isinstance(request_metrics, RequestMetrics):
        return False
    entry = server.get_request_handler(METHOD)
    return entry is not None and entry.handler == resources.read_resource


class HandshakeReads:
    """Answers plain ``resources/read`` requests of one stdio connection (see the module's docstring).

    The transport shows it every line before the SDK parses it (:meth:`take`), every message the SDK gets
    (:meth:`observe_incoming`) and every message the SDK sends (:meth:`observe_outgoing`): from those it knows
    the connection's era, whether an ``initialize`` is pending and the version the last one negotiated.
    """

    def __init__(self, server: Server[Any], resources: StoreResources, caller: Caller) -> None:
        self._server = server
        self._resources = resources
        self._caller = caller
        self._usable = False
        self._handshake_era: bool | None = None
        """Decided by the connection's first request, as the SDK decides it."""
        self._version: str | None = None
        """The protocol version the last answered ``initialize`` negotiated."""
        self._initializing: set[RequestId] = set()
        self._in_flight: dict[RequestId, _Read] = {}
        self._group: TaskGroup | None = None
        self._sender: Sender | None = None
        self._splices: Splices | None = None
        self._ok = metrics.MCP_REQUESTS.labels(METHOD, "ok")
        self._error = metrics.MCP_REQUESTS.labels(METHOD, "error")

    def start(self, group: TaskGroup, sender: Sender, splices: Splices) -> None:
        """Answer from now on in ``group``'s tasks, through ``sender`` (the server is served as it is now)."""
        self._group, self._sender, self._splices = group, sender, splices
        self._usable = store_layers_only(self._server, self._resources)
        if not self._usable:
            logger.debug("the server has other layers than the store's: every read goes through the SDK")

    def _ready(self) -> bool:
        return (
            self._usable
            and self._group is not None
            and self._handshake_era is True
            and self._version is not None
            and not self._initializing
        )

    def take(self, line: bytes) -> bool:
        """Answer ``line`` here if it is a plain store read this connection can answer; False: the SDK's."""
        if _MARK not in line or not self._ready() or _tracing():
            return False
        try:
            request = _plain_read(json.loads(line.decode("utf-8")))
        except ValueError:  # not UTF-8 or not JSON: the SDK answers with its parse error
            return False
        if request is None:
            return False
        request_id, uri = request
        read = _Read()
        # Registered before the next line is looked at, so a cancellation right behind the request finds it; a
        # duplicate id replaces the older entry, as in the SDK's dispatcher.
        self._in_flight[coerce_request_id(request_id)] = read
        assert self._group is not None
        self._group.start_soon(self._answer, request_id, uri, read)
        return True

    def observe_incoming(self, message: JSONRPCMessage) -> None:
        """A message the SDK is about to get."""
        if isinstance(message, JSONRPCRequest):
            if self._handshake_era is None:
                meta = (message.params or {}).get("_meta")
                # The SDK's rule: the 2026-07-28 envelope's version key on a first request that is not an
                # initialize opens a 2026-era connection.
                modern = isinstance(meta, dict) and PROTOCOL_VERSION_META_KEY in meta
                self._handshake_era = message.method == "initialize" or not modern
            if message.method == "initialize":
                # Until it is answered, the SDK holds later requests back and may change the version.
                self._initializing.add(coerce_request_id(message.id))
        elif isinstance(message, JSONRPCNotification) and message.method == "notifications/cancelled":
            request_id = as_request_id((message.params or {}).get("requestId"))
            read = self._in_flight.get(coerce_request_id(request_id)) if request_id is not None else None
            if read is not None:
                read.cancelled = True
                read.scope.cancel()

    def observe_outgoing(self, message: JSONRPCMessage) -> None:
        """A message the SDK sends: the answer to an ``initialize`` says the version it committed."""
        if not isinstance(message, JSONRPCResponse | JSONRPCError) or message.id is None:
            return
        key = coerce_request_id(message.id)
        if key not in self._initializing:
            return
        self._initializing.discard(key)
        if isinstance(message, JSONRPCResponse):
            version = message.result.get("protocolVersion")
            # A failed initialize commits nothing: the version stays what it was.
            self._version = version if version in HANDSHAKE_PROTOCOL_VERSIONS else None

    def close(self) -> None:
        """The input ended: cancel the reads still running (each answers "Connection closed")."""
        self._usable = False
        for read in list(self._in_flight.values()):
            read.scope.cancel()

    async def _answer(self, request_id: RequestId, uri: str, read: _Read) -> None:
        assert self._sender is not None
        assert self._splices is not None
        key = coerce_request_id(request_id)
        answer_started = False
        try:
            with read.scope:
                try:
                    result = await self._resources.read_handshake_wire(self._caller, _Uri(uri))
                except MCPError as exc:
                    self._error.inc()
                    parts = _error_parts(request_id, exc.error)
                except BaseException:
                    self._error.inc()
                    raise
                else:
                    self._ok.inc()
                    parts = self._splices.response_parts(request_id, result)
                finally:
                    if self._in_flight.get(key) is read:
                        del self._in_flight[key]
                if not read.cancelled:
                    answer_started = True
                    await self._sender.send_parts(parts)
        except anyio.get_cancelled_exc_class():
            if not answer_started and not read.cancelled:
                await self._answer_closed(request_id)
            raise
        if read.scope.cancelled_caught and not answer_started and not read.cancelled:
            await self._answer_closed(request_id)  # cancelled by close(): the input ended

    async def _answer_closed(self, request_id: RequestId) -> None:
        assert self._sender is not None
        closed = ErrorData(code=CONNECTION_CLOSED, message="Connection closed")
        with anyio.move_on_after(_CLOSE_WRITE_SECONDS, shield=True):
            await self._sender.send_parts(_error_parts(request_id, closed))


def _error_parts(request_id: RequestId, error: ErrorData) -> list[bytes]:
    """The error answer, serialized as the stdio writer serializes the SDK's."""
    message = JSONRPCError(jsonrpc="2.0", id=request_id, error=error)
    return [message.__pydantic_serializer__.to_json(message, by_alias=True, exclude_unset=True), b"\n"]

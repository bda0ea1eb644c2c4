"""The store's side of the proxy: its resources and ``read_artifact`` as an in-process MCP server.

The relay speaks to it in raw JSON-RPC (dicts), exactly as it speaks to the upstream, and the SDK's low-level
``Server`` does what differs between the protocol eras (the 2025-11-25 handshake or the 2026-07-28 envelope,
result shapes, ``resultType``). Reads and the read tool are the ones ``blobstore mcp`` serves
(:class:`~mcp_resources.reading.resources.StoreResources`, :class:`~mcp_resources.tools.tools.StoreTools`);
the upload tools are not offered through the proxy.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Final

import anyio
from mcp.server import Server, ServerRequestContext
from mcp.shared.memory import create_client_server_memory_streams
from mcp.shared.message import SessionMessage
from mcp.types import (
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    jsonrpc_message_adapter,
)

from blobstore import __version__
from blobstore.models import Caller
from blobstore.service import ArtifactService
from mcp_resources.reading.resources import StoreResources
from mcp_resources.tools.tools import TOOLS_TTL_MS, HostTakes, StoreTools
from mcp_resources.transports.server import SERVER_NAME, fixed_caller

READ_TOOL: Final = "read_artifact"
RELAYED: Final = frozenset({"notifications/progress"})
"""The store server's notifications the host gets (a view's progress, under the host's own token)."""


class RequestCancelled(Exception):
    """The host cancelled the request: the store stopped its work and answers nothing."""


class LocalStore:
    """An in-process server for ``blobstore://`` reads and the read tool, answered in the caller's era."""

    def __init__(
        self,
        service: ArtifactService,
        caller: Caller,
        *,
        window_max: int | None = None,
        host_takes: HostTakes | None = None,
    ) -> None:
        # Every read fits the host's caps: an artifact is read whole only up to a window, a larger one
        # without a window comes as its first window (resources/read and read_artifact alike).
        self.resources = StoreResources(
            service, fixed_caller(caller), window_max=window_max, inline_max=window_max, first_window=True
        )
        # read_artifact answers in text what the host's model cannot take (the proxy's host profile).
        self.tools = (
            StoreTools(self.resources)
            if host_takes is None
            else StoreTools(self.resources, host_takes=host_takes)
        )
        self.read_tool = next(tool for tool in self.tools.tools if tool.name == READ_TOOL)
        self.server: Server[Any] = Server(
            SERVER_NAME,
            version=__version__,
            on_list_resources=self.resources.list_resources,
            on_list_resource_templates=self.resources.list_templates,
            on_read_resource=self.resources.read_resource,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )
        self._ids = itertools.count(1)
        self._waiting: dict[int, anyio.Event] = {}
        self._answers: dict[int, dict[str, Any]] = {}
        self._by_host: dict[str, int] = {}
        self._cancelled: set[int] = set()
        self._send: Any = None
        self.relay: Callable[[Mapping[str, Any]], Awaitable[None]] | None = None
        """Where the store server's :data:`RELAYED` notifications go (the host)."""

    def fit(self, window_max: int) -> None:
        """Size the store's windows for the host profile picked at the handshake."""
        self.resources.cap_windows(window_max)

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return ListToolsResult(tools=[self.read_tool], ttl_ms=TOOLS_TTL_MS, cache_scope="public")

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
    ) -> CallToolResult:
        # Only the read tool is reachable: the relay routes nothing else here.
        return await self.tools.call_tool(ctx, params.model_copy(update={"name": READ_TOOL}))

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[LocalStore]:
        async with create_client_server_memory_streams() as (client, server), anyio.create_task_group() as tg:
            server_read, server_write = server
            client_read, client_write = client
            self._send = client_write
            tg.start_soon(
                self.server.run, server_read, server_write, self.server.create_initialization_options()
            )
            tg.start_soon(self._receive, client_read)
            try:
                yield self
            finally:
                tg.cancel_scope.cancel()

    async def _receive(self, stream: Any) -> None:
        async for item in stream:
            if not isinstance(item, SessionMessage):
                continue
            message = item.message.model_dump(by_alias=True, mode="json", exclude_unset=True)
            ident = message.get("id")
            if message.get("method") in RELAYED and "id" not in message and self.relay is not None:
                await self.relay(message)
                continue
            if "method" in message or not isinstance(ident, int) or ident not in self._waiting:
                continue  # the store server sends no requests; its other notifications are not relayed
            self._answers[ident] = message
            self._waiting.pop(ident).set()

    async def notify(self, message: Mapping[str, Any]) -> None:
        await self._send.send(SessionMessage(jsonrpc_message_adapter.validate_python(dict(message))))

    async def request(self, message: Mapping[str, Any]) -> dict[str, Any]:
        """Send a request (its id is replaced); the response's ``result`` or ``error`` part.
        :class:`RequestCancelled` when :meth:`cancel` names its original id meanwhile."""
        ident = next(self._ids)
        done = anyio.Event()
        self._waiting[ident] = done
        host_key = json.dumps(message.get("id"))
        self._by_host[host_key] = ident
        wire = {**message, "id": ident}
        try:
            await self._send.send(SessionMessage(jsonrpc_message_adapter.validate_python(wire)))
            await done.wait()
        finally:
            if self._by_host.get(host_key) == ident:
                del self._by_host[host_key]
        if ident in self._cancelled:
            self._cancelled.discard(ident)
            raise RequestCancelled()
        answer = self._answers.pop(ident)
        return {key: value for key, value in answer.items() if key in ("result", "error")}

    async def cancel(self, host_id: Any) -> bool:
        """Cancel the request in flight under the host's ``host_id`` (its view's worker is stopped); False
        when there is none."""
        ident = self._by_host.get(json.dumps(host_id))
        waiting = self._waiting.pop(ident, None) if ident is not None else None
        if ident is None or waiting is None:
            return False
        self._cancelled.add(ident)
        await self.notify(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": ident}}
        )
        waiting.set()
        return True

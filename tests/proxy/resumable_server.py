"""An MCP server on the official SDK's streamable HTTP with an event store, for the proxy's resumption test.

Its tool ``report`` closes its own answer stream first (``Context.close_sse_stream``, the SDK's polling for
long operations): the answer is stored as an event and comes only to a client that reconnects with
``Last-Event-ID``, after the ``retry`` the server names. ``python resumable_server.py PORT``.
"""

from __future__ import annotations

import itertools
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp.types import JSONRPCMessage


class MemoryEvents(EventStore):
    """Every event of every stream, in order, in memory."""

    def __init__(self) -> None:
        self._events: list[tuple[EventId, StreamId, JSONRPCMessage | None]] = []
        self._ids = itertools.count(1)

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        event_id = f"ev-{next(self._ids)}"
        self._events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        found = next((i for i, event in enumerate(self._events) if event[0] == last_event_id), None)
        if found is None:
            return None
        stream = self._events[found][1]
        for event_id, stream_id, message in self._events[found + 1 :]:
            if stream_id == stream and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream


server = MCPServer("resumable")


@server.tool()
async def report(ctx: Context) -> str:
    """Answers after closing its answer stream, as a long operation that asks to be polled."""
    await ctx.close_sse_stream()
    await anyio.sleep(0.3)
    return "the report, after a reconnection"


if __name__ == "__main__":
    server.run("streamable-http", port=int(sys.argv[1]), event_store=MemoryEvents(), retry_interval=200)

"""The messages of a streamable-HTTP upstream's open answers, in arrival order, a few at a time.

Each POST's answer is read by its own task; they meet here. The box holds at most ``capacity`` messages, so
an answer arriving faster than the host takes them waits in its HTTP stream (TCP's flow control), as a
stdio upstream waits in its pipe, instead of piling up in the proxy's memory.
"""

from __future__ import annotations

import asyncio
from collections import deque

import anyio

from mcp_resources.proxy.message_reader import Incoming, Streamed


class Mailbox:
    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._items: deque[Incoming] = deque()
        self._changed = asyncio.Condition()
        self._ended = False

    async def put(self, item: Incoming) -> None:
        """Wait for room, then add ``item``; after :meth:`end`, drop it (and free what it holds)."""
        try:
            async with self._changed:
                while len(self._items) >= self._capacity and not self._ended:
                    await self._changed.wait()
                if not self._ended:
                    self._items.append(item)
                    self._changed.notify_all()
                    return
        except asyncio.CancelledError:
            # The upstream is closing: what the message staged must not stay behind.
            await _free(item)
            raise
        await _free(item)

    async def get(self) -> Incoming | None:
        """The next message; after :meth:`end`, those still held, then None."""
        async with self._changed:
            while not self._items and not self._ended:
                await self._changed.wait()
            if not self._items:
                return None
            item = self._items.popleft()
            self._changed.notify_all()
            return item

    async def end(self) -> None:
        async with self._changed:
            self._ended = True
            self._changed.notify_all()

    @property
    def ended(self) -> bool:
        return self._ended


async def _free(item: Incoming) -> None:
    if isinstance(item, Streamed):
        with anyio.CancelScope(shield=True):
            await item.sinks.release()

"""Upstream messages off a byte stream, one line each, read incrementally past a small size.

A line that ends within :data:`WHOLE_LINE` bytes is returned as it came (:class:`Whole`): the relay parses
it and can forward its exact bytes. A longer one goes through the incremental reader
(:mod:`~mcp_resources.proxy.json_stream`) as it arrives (:class:`Streamed`): its long strings go to the
message's sinks (the store's staging, or a temporary file) and only the rest is held.

Refused (:class:`Refused`, with the top-level ``id`` and ``method`` when they were read, so the call it
answered can be told): a line whose held part (all but the payloads streamed into the store) passes the
cap, one that is not JSON, one cut off by the end of the stream. The reader then goes on with the next line.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol

from mcp_resources.proxy.json_stream import JsonError, JsonReader
from mcp_resources.proxy.long_values import MessageSinks

WHOLE_LINE: Final = 1024 * 1024
"""Lines up to this long are read whole and forwarded byte for byte when nothing changes in them."""
READ_SIZE: Final = 1024 * 1024

CUT_OFF: Final = "the stream ended in the middle of a message"

RefusalReason = Literal["over_cap", "invalid_json", "cut_off"]


@dataclass
class Whole:
    raw: bytes


@dataclass
class Streamed:
    message: Any
    size: int
    sinks: MessageSinks


@dataclass
class Refused:
    reason: RefusalReason
    detail: str
    size: int
    ident: Any = None
    method: Any = None
    max_message_bytes: int | None = None
    """The cap, for a message over it."""


Incoming = Whole | Streamed | Refused


class ByteSource(Protocol):
    """Where the reader's bytes come from: a child's stdout, or an HTTP answer made into lines."""

    async def read(self, n: int = -1, /) -> bytes:
        """At most ``n`` bytes; empty only at the end."""


class MessageReader:
    def __init__(
        self,
        stream: ByteSource,
        *,
        max_message: int,
        sinks: Callable[[], MessageSinks],
        long_at: int,
        who: str = "the upstream",
    ) -> None:
        self._who = who
        self._stream = stream
        self._max = max_message
        self._sinks = sinks
        self._long_at = long_at
        self._buf = bytearray()
        self._ended = False
        self._skipping = False
        """The rest of a refused line is skipped unread."""

    async def _more(self) -> bytes:
        if self._ended:
            return b""
        data = await self._stream.read(READ_SIZE)
        if not data:
            self._ended = True
        return data

    async def next(self) -> Incoming | None:
        """The next message, None at the end of the stream."""
        buf = self._buf
        limit = min(WHOLE_LINE, self._max)
        while True:
            newline = buf.find(b"\n")
            if self._skipping:
                if newline < 0:
                    buf.clear()
                else:
                    del buf[: newline + 1]
                    self._skipping = False
                    continue
            elif 0 <= newline <= limit:
                line = bytes(buf[:newline]).strip()
                del buf[: newline + 1]
                if line:
                    return Whole(line)
                continue
            elif newline >= 0 or len(buf) > limit:
                return await self._incremental()
            data = await self._more()
            if not data:
                rest = bytes(buf).strip()
                buf.clear()
                if rest and not self._skipping:
                    return Refused("cut_off", CUT_OFF, len(rest))
                return None
            buf += data

    async def _incremental(self) -> Incoming:
        sinks = self._sinks()
        reader = JsonReader(long_strings=sinks, long_at=self._long_at)
        size = 0
        over = False
        broken: JsonError | None = None
        pending = bytes(self._buf)
        self._buf.clear()
        while True:
            newline = pending.find(b"\n")
            part = pending if newline < 0 else pending[:newline]
            size += len(part)
            if broken is None:
                try:
                    await asyncio.to_thread(reader.feed, part)
                except JsonError as exc:
                    broken = exc
                    sinks.abort()
                await sinks.drain()
            if not over and size - sinks.staged_bytes() > self._max:
                # Past the cap: nothing more is held, and the call it answers is told as soon as it is known.
                over = True
                reader.discard()
                sinks.abort()
                await sinks.drain()
            if over and newline < 0 and isinstance(reader.root, dict) and "id" in reader.root:
                self._skipping = True
                await sinks.release()
                return self._refused(reader, "over_cap", self._over_cap(), size, self._max)
            if newline >= 0:
                self._buf += pending[newline + 1 :]
                return await self._complete(reader, sinks, size, over, broken)
            pending = await self._more()
            if not pending:
                sinks.abort()
                await sinks.drain()
                await sinks.release()
                return self._refused(reader, "cut_off", CUT_OFF, size)

    def _over_cap(self) -> str:
        return f"{self._who}'s message is over the {self._max}-byte cap (BLOBSTORE_PROXY_MAX_MESSAGE_BYTES)"

    async def _complete(
        self, reader: JsonReader, sinks: MessageSinks, size: int, over: bool, broken: JsonError | None
    ) -> Incoming:
        if broken is None:
            try:
                message = reader.finish()
            except JsonError as exc:
                broken = exc
                sinks.abort()
        await sinks.drain()
        if broken is not None or over:
            await sinks.release()
            if over:
                return self._refused(reader, "over_cap", self._over_cap(), size, self._max)
            return self._refused(reader, "invalid_json", f"the upstream sent invalid JSON: {broken}", size)
        return Streamed(message, size, sinks)

    @staticmethod
    def _refused(
        reader: JsonReader, reason: RefusalReason, detail: str, size: int, cap: int | None = None
    ) -> Refused:
        root = reader.root
        top = root if isinstance(root, dict) else {}
        return Refused(
            reason, detail, size, ident=top.get("id"), method=top.get("method"), max_message_bytes=cap
        )

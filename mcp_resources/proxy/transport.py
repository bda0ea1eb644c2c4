"""Raw JSON-RPC channels for the proxy: the host on stdio, the upstream as a child process.

Each channel moves whole messages as bytes (one JSON text, no newline), so the relay can forward what it
received without serializing it again. Over stdio a message is one line (newline-delimited JSON, as MCP's
stdio transport defines). The streamable-HTTP upstream is :mod:`~mcp_resources.proxy.http_upstream`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Protocol

from mcp_resources.proxy.long_values import MessageSinks
from mcp_resources.proxy.message_reader import (
    READ_SIZE,
    WHOLE_LINE,
    ByteSource,
    Incoming,
    MessageReader,
    Whole,
)
from mcp_resources.transports.stdio import LINE_LIMIT, HostStdio

__all__ = ["LINE_LIMIT", "Channel", "HostStdio", "StdioUpstream", "Upstream"]

logger = logging.getLogger("mcp_resources.proxy")


class Channel(Protocol):
    async def receive(self) -> Incoming | None:
        """The next message, or None at the end."""

    async def send(self, message: bytes) -> None: ...

    async def send_parts(self, parts: list[bytes]) -> None:
        """Write these bytes as part of a message (the caller writes its line end)."""


class Upstream(Protocol):
    description: str

    async def receive(self) -> Incoming | None:
        """The next message, or None at the end."""

    async def send(self, message: bytes) -> None: ...

    async def send_parts(self, parts: AsyncIterator[bytes], message: Mapping[str, Any]) -> None:
        """Send one message given in pieces (no line end); ``message`` is what they encode, its large
        strings held elsewhere."""

    async def start(self) -> None: ...

    async def close(self) -> None:
        """Stop sending; end the upstream (politely first)."""

    def exit_status(self) -> int | None: ...

    async def finished(self) -> None:
        """Wait until the upstream has ended (a child process exits)."""


class StdioUpstream:
    """An upstream MCP server run as a child process; its stderr goes to ours."""

    def __init__(
        self,
        command: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        reading: Callable[[ByteSource], MessageReader],
    ) -> None:
        self.command = list(command)
        self.env = dict(env) if env is not None else None
        self.description = os.path.basename(self.command[0])
        self._process: asyncio.subprocess.Process | None = None
        self._reading = reading
        self._reader: MessageReader | None = None
        self._sending = asyncio.Lock()

    async def start(self) -> None:
        self._process = await asyncio.create_subprocess_exec(
            *self.command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=self.env,
            # What the pipe's reader buffers before it stops reading: a few of the reader's pieces.
            limit=READ_SIZE,
        )

    async def receive(self) -> Incoming | None:
        if self._reader is None:
            assert self._process is not None
            assert self._process.stdout is not None
            self._reader = self._reading(self._process.stdout)
        return await self._reader.next()

    def _stdin(self) -> asyncio.StreamWriter:
        assert self._process is not None
        assert self._process.stdin is not None
        stdin = self._process.stdin
        if stdin.is_closing():
            raise ConnectionResetError("upstream stdin is closed")
        return stdin

    async def send(self, message: bytes) -> None:
        async with self._sending:
            stdin = self._stdin()
            stdin.write(message + b"\n")
            await stdin.drain()

    async def send_parts(self, parts: AsyncIterator[bytes], message: Mapping[str, Any]) -> None:
        async with self._sending:
            async for part in parts:
                stdin = self._stdin()
                stdin.write(part)
                await stdin.drain()
            self._stdin().write(b"\n")

    async def close(self, grace: float = 5.0) -> None:
        process = self._process
        if process is None or process.returncode is not None:
            return
        if process.stdin is not None and not process.stdin.is_closing():
            process.stdin.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), grace)
            return
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), grace)
            return
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()

    def exit_status(self) -> int | None:
        return self._process.returncode if self._process is not None else None

    async def finished(self) -> None:
        if self._process is not None:
            await self._process.wait()


class HostChannel:
    """The host on stdio, its messages read as the upstream's are: past a small size incrementally, long
    strings (large tool arguments) in temporary files, the held rest capped."""

    def __init__(self, host: HostStdio, *, max_message: int) -> None:
        self.host = host
        self._max = max_message
        self._reader: MessageReader | None = None

    async def receive(self) -> Incoming | None:
        stream = self.host.stream
        if stream is None:  # not a pipe or socket: read line by line
            line = await self.host.receive()
            return None if line is None else Whole(line)
        if self._reader is None:
            self._reader = MessageReader(
                stream, max_message=self._max, sinks=MessageSinks, long_at=WHOLE_LINE, who="the host"
            )
        return await self._reader.next()

    async def send(self, message: bytes) -> None:
        await self.host.send(message)

    async def send_parts(self, parts: list[bytes]) -> None:
        await self.host.send_parts(parts)

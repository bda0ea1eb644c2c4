"""MCP over the host's stdin and stdout, read and written by the event loop.

A message is one line of UTF-8 JSON (newline-delimited JSON-RPC, as MCP's stdio transport defines). The SDK's
own ``stdio_server`` reads each line and writes each answer in a worker thread; here pipes and sockets (what
hosts give) are the event loop's own transports, so a request costs no thread handoff on its way in or out.
:class:`HostStdio` moves whole lines as bytes (the proxy relays them as they are); :func:`serve_on_stdio`
parses them into the SDK's messages for a low-level ``Server``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import stat
import sys
from collections.abc import Iterator
from types import TracebackType
from typing import Any, BinaryIO, Final, Self

import anyio
from mcp.server import Server
from mcp.shared.message import SessionMessage
from mcp.types import jsonrpc_message_adapter

LINE_LIMIT: Final = 256 * 1024 * 1024
"""The longest message accepted on a stdio channel (a line holds a whole result, base64 included)."""
THREAD_WRITE_AT: Final = 64 * 1024
"""Messages from this size on are written by a worker thread (a pipe holds 64 KiB): see HostStdio.send."""


async def read_line(reader: asyncio.StreamReader) -> bytes | None:
    """The next non-blank line without its line end, or None at the end of the stream."""
    while True:
        try:
            line = await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:
            line = exc.partial
            if not line.strip():
                return None
        stripped = line.strip()
        if stripped:
            return stripped


@contextlib.contextmanager
def _diverted_std_fds() -> Iterator[None]:
    """Point fd 0 at the null device and fd 1 at stderr, restoring both after.

    While the protocol runs on duplicates of them, a stray ``print`` (or a child process) must not write
    into the protocol stream or read from it; the SDK's stdio transport does the same.
    """
    saved = [os.dup(0), os.dup(1)]
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(devnull, 0)
        os.dup2(2, 1)
        yield
    finally:
        os.close(devnull)
        with contextlib.suppress(ValueError, OSError):
            sys.stdout.flush()
        for fd, copy in enumerate(saved):
            os.dup2(copy, fd)
            os.close(copy)


def _write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to a non-blocking pipe, waiting for room in between."""
    view = memoryview(data)
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            poller.poll()


def _pollable(stream: BinaryIO) -> bool:
    """A pipe or a socket: what the event loop can wait on."""
    mode = os.fstat(stream.fileno()).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class HostStdio:
    """The host's side: messages in on stdin, out on stdout.

    Pipes and sockets (what hosts give) are read and written by the event loop; anything else (a file, a
    terminal, ``/dev/null``) line by line in a worker thread.
    """

    def __init__(self) -> None:
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._stdin: BinaryIO | None = None
        self._stdout: BinaryIO | None = None
        # One message at a time on the pipe: a long one goes out from a thread while others wait.
        self._sending = asyncio.Lock()

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        # Duplicates, so closing the transports never closes the process's own descriptors.
        stdin = os.fdopen(os.dup(sys.stdin.fileno()), "rb", buffering=0)
        stdout = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
        reader = asyncio.StreamReader(limit=LINE_LIMIT)
        # asyncio also takes a character device (a terminal, /dev/null), but registers it with the selector
        # only in a later callback, where the kernel refuses one that cannot be polled (/dev/null: EPERM) and
        # the read then never ends: only pipes and sockets go to the event loop.
        if _pollable(stdin):
            await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
            self._reader = reader
        else:
            self._stdin = os.fdopen(os.dup(sys.stdin.fileno()), "rb")
            stdin.close()
        if _pollable(stdout):
            transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, stdout)
            self._writer = asyncio.StreamWriter(transport, protocol, None, loop)
        else:
            self._stdout = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
            stdout.close()

    async def receive(self) -> bytes | None:
        if self._reader is not None:
            return await read_line(self._reader)
        assert self._stdin is not None
        while True:
            line = await asyncio.to_thread(self._stdin.readline)
            if not line:
                return None
            if line.strip():
                return line.strip()

    async def send(self, message: bytes) -> None:
        if self._writer is not None:
            async with self._sending:
                if len(message) < THREAD_WRITE_AT:
                    self._writer.write(message)
                    self._writer.write(b"\n")
                    await self._writer.drain()
                else:
                    # A long line written by the loop costs an event-loop turn for every few KiB the host
                    # drains; a worker thread waits on the pipe without the loop's machinery (or the GIL).
                    fd = self._writer.transport.get_extra_info("pipe").fileno()
                    await asyncio.to_thread(_write_all, fd, message + b"\n")
            return
        assert self._stdout is not None
        out = self._stdout
        await asyncio.to_thread(lambda: (out.write(message + b"\n"), out.flush()))

    async def close(self) -> None:
        """Flush what is written and release the duplicated descriptors."""
        if self._writer is not None:
            with contextlib.suppress(ConnectionError):
                await self._writer.drain()
            self._writer.close()
        elif self._stdout is not None:
            self._stdout.close()
        if self._stdin is not None:
            self._stdin.close()


class _HostStream:
    """One side of the SDK's stream pair over the host channel, which outlives it (its owner closes it)."""

    def __init__(self, host: HostStdio) -> None:
        self._host = host

    async def aclose(self) -> None:
        return None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        return None


class _Incoming(_HostStream):
    """The SDK's read stream over a host channel: one parsed message per line, parse errors as items."""

    async def receive(self) -> SessionMessage | Exception:
        line = await self._host.receive()
        if line is None:
            raise anyio.EndOfStream
        # Undecodable bytes become U+FFFD, as the SDK's transport reads them, so the parse error names JSON.
        text = line.decode("utf-8", errors="replace")
        try:
            return SessionMessage(jsonrpc_message_adapter.validate_json(text, by_name=False))
        except Exception as exc:  # the SDK answers a message it cannot parse; it does not end the session
            return exc

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


class _Outgoing(_HostStream):
    """The SDK's write stream over a host channel: each message serialized and written as one line."""

    async def send(self, item: SessionMessage, /) -> None:
        message = item.message
        await self._host.send(
            message.__pydantic_serializer__.to_json(message, by_alias=True, exclude_unset=True)
        )


async def serve_on_stdio(server: Server[Any]) -> None:
    """Serve ``server`` on the process's stdin and stdout until the host closes stdin."""
    host = HostStdio()
    await host.open()
    try:
        with _diverted_std_fds():
            await server.run(_Incoming(host), _Outgoing(host), server.create_initialization_options())
    finally:
        await host.close()

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
import fcntl
import logging
import os
import select
import stat
import sys
from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, BinaryIO, Final, Protocol, Self

import anyio
from mcp.server import Server
from mcp.shared.message import SessionMessage
from mcp.types import jsonrpc_message_adapter

from mcp_resources.results.wire_blobs import Splices, splicing

if TYPE_CHECKING:
    from mcp_resources.transports.stdio_reads import HandshakeReads

logger = logging.getLogger("mcp_resources.stdio")

LINE_LIMIT: Final = 256 * 1024 * 1024
"""The longest message accepted on a stdio channel (a line holds a whole result, base64 included)."""
LONG_LINE_AT: Final = 64 * 1024
"""Messages from this size on are written straight to the pipe, what does not fit by a worker thread (a pipe
holds 64 KiB unless widened): see HostStdio._send_long."""
PIPE_SIZE: Final = 2 * 1024 * 1024
"""The room asked for on an outgoing pipe, at most what the system allows: a 1 MiB window's line and more."""


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


def _write_now(fd: int, parts: Sequence[bytes | memoryview]) -> list[memoryview]:
    """Write what a non-blocking pipe takes of ``parts`` now; what is left, in order."""
    views = [memoryview(part) for part in parts if part]
    try:
        written = os.writev(fd, views)
    except BlockingIOError:
        return views
    while written:
        if written >= len(views[0]):
            written -= len(views.pop(0))
        else:
            views[0] = views[0][written:]
            written = 0
    return views


def _write_all(fd: int, parts: Sequence[bytes | memoryview]) -> None:
    """Write all of ``parts``, in order, to a non-blocking pipe, waiting for room in between."""
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    rest = _write_now(fd, parts)
    while rest:
        poller.poll()
        rest = _write_now(fd, rest)


def _widen_pipe(fd: int) -> int:
    """Give an outgoing pipe room for most of a window's line where the system allows it; the room it has.

    A 1.4 MB line through a 64 KiB pipe wakes the writer and the host about twenty times; with the room the
    system grants an unprivileged process (``/proc/sys/fs/pipe-max-size``, 1 MiB by default) about twice. A
    system that refuses keeps the pipe as it was, which only costs those wake-ups; one that cannot tell
    (no ``F_GETPIPE_SZ``) reports 0.
    """
    set_size, get_size = getattr(fcntl, "F_SETPIPE_SZ", None), getattr(fcntl, "F_GETPIPE_SZ", None)
    if set_size is None or get_size is None:
        return 0
    try:
        with open("/proc/sys/fs/pipe-max-size", "rb") as limit:
            allowed = int(limit.read())
        fcntl.fcntl(fd, set_size, min(allowed, PIPE_SIZE))
    except (OSError, ValueError) as exc:
        logger.debug("the stdout pipe keeps its size: %r", exc)
    try:
        return fcntl.fcntl(fd, get_size)
    except OSError as exc:
        logger.debug("the stdout pipe's size is not known: %r", exc)
        return 0


def _pollable(stream: BinaryIO) -> bool:
    """A pipe or a socket: what the event loop can wait on."""
    mode = os.fstat(stream.fileno()).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class HostStdio:
    """The host's side: messages in on stdin, out on stdout.

    Pipes and sockets (what hosts give) are read and written by the event loop; anything else (a file, a
    terminal, ``/dev/null``) line by line in a worker thread.
    """

    def __init__(self, *, limit: int = LINE_LIMIT) -> None:
        self._limit = limit
        """What the pipe's reader buffers at most (twice this before it stops reading)."""
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._stdin: BinaryIO | None = None
        self._stdout: BinaryIO | None = None
        # One message at a time on the pipe: a long one may go out from a thread while others wait.
        self._sending = asyncio.Lock()
        self._pipe_room = 0
        """What the outgoing pipe holds (0 for a socket, whose room is not known)."""

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        # Duplicates, so closing the transports never closes the process's own descriptors.
        stdin = os.fdopen(os.dup(sys.stdin.fileno()), "rb", buffering=0)
        stdout = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
        reader = asyncio.StreamReader(limit=self._limit)
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
            if stat.S_ISFIFO(os.fstat(stdout.fileno()).st_mode):
                self._pipe_room = _widen_pipe(stdout.fileno())
            transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, stdout)
            # Flushed means empty: a long line goes straight to the pipe, never behind buffered bytes.
            transport.set_write_buffer_limits(high=0)
            self._writer = asyncio.StreamWriter(transport, protocol, None, loop)
        else:
            self._stdout = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
            stdout.close()

    @property
    def stream(self) -> asyncio.StreamReader | None:
        """Stdin as the event loop reads it, for a caller that reads it in pieces; None when it is read
        line by line in a thread (not a pipe or socket)."""
        return self._reader

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
        await self.send_parts([message, b"\n"])

    async def send_parts(self, parts: list[bytes]) -> None:
        """Write one message given in parts (its line end included) as one line."""
        if self._writer is not None:
            async with self._sending:
                if sum(len(part) for part in parts) < LONG_LINE_AT:
                    self._writer.writelines(parts)
                    await self._writer.drain()
                else:
                    await self._send_long(self._writer, parts)
            return
        assert self._stdout is not None
        out = self._stdout

        def write() -> None:
            out.writelines(parts)
            out.flush()

        await asyncio.to_thread(write)

    async def _send_long(self, writer: asyncio.StreamWriter, parts: list[bytes]) -> None:
        """Write a long line: what the pipe takes now at once, the rest by the loop when it fits in the pipe's
        room, else by a worker thread.

        A rest larger than the pipe written by the loop costs an event-loop turn for every pipe-full the
        host drains (twenty for a 1 MiB window through a 64 KiB pipe); a worker thread waits on the pipe
        without the loop's machinery (or the GIL), but its handoff costs more than one or two turns. The
        parts are written as they are, never joined, except a rest the loop writes.
        """
        fd = writer.transport.get_extra_info("pipe").fileno()
        rest = _write_now(fd, parts)
        if not rest:
            return
        if sum(len(view) for view in rest) <= self._pipe_room:
            writer.write(b"".join(rest))
            await writer.drain()
        else:
            await asyncio.to_thread(_write_all, fd, rest)

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


class LineChannel(Protocol):
    """Whole lines in and out: what :func:`serve_lines` serves on (:class:`HostStdio` on stdio)."""

    async def receive(self) -> bytes | None: ...

    async def send_parts(self, parts: list[bytes]) -> None: ...


class _HostStream:
    """One side of the SDK's stream pair over the host channel, which outlives it (its owner closes it)."""

    def __init__(self, host: LineChannel, reads: HandshakeReads | None) -> None:
        self._host = host
        self._reads = reads

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
    """The SDK's read stream over a host channel: one parsed message per line, parse errors as items; plain
    store reads are answered by ``reads`` instead, when it can."""

    async def receive(self) -> SessionMessage | Exception:
        while True:
            line = await self._host.receive()
            if line is None:
                if self._reads is not None:
                    self._reads.close()  # as the SDK's dispatcher cancels its own requests at the end
                raise anyio.EndOfStream
            if self._reads is not None and self._reads.take(line):
                continue
            # Undecodable bytes become U+FFFD, as the SDK's transport reads them: the parse error names JSON.
            text = line.decode("utf-8", errors="replace")
            try:
                message = jsonrpc_message_adapter.validate_json(text, by_name=False)
            except Exception as exc:  # the SDK answers a message it cannot parse; it does not end the session
                return exc
            if self._reads is not None:
                self._reads.observe_incoming(message)
            return SessionMessage(message)

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


class _Outgoing(_HostStream):
    """The SDK's write stream over a host channel: each message serialized and written as one line, the
    base64 blobs this connection made written as they are (:mod:`mcp_resources.results.wire_blobs`)."""

    def __init__(self, host: LineChannel, splices: Splices, reads: HandshakeReads | None) -> None:
        super().__init__(host, reads)
        self._splices = splices

    async def send(self, item: SessionMessage, /) -> None:
        message = item.message
        if self._reads is not None:
            self._reads.observe_outgoing(message)
        parts = self._splices.line_parts(message)
        if parts is None:
            line = message.__pydantic_serializer__.to_json(message, by_alias=True, exclude_unset=True)
            parts = [line, b"\n"]
        await self._host.send_parts(parts)


async def serve_lines(
    server: Server[Any], channel: LineChannel, *, reads: HandshakeReads | None = None
) -> None:
    """Serve ``server`` on ``channel`` until its input ends; with ``reads``, plain store reads are answered
    beside the SDK's dispatcher (:mod:`mcp_resources.transports.stdio_reads`)."""
    splices = Splices()
    with splicing(splices):
        async with anyio.create_task_group() as group:
            if reads is not None:
                reads.start(group, channel, splices)
            await server.run(
                _Incoming(channel, reads),
                _Outgoing(channel, splices, reads),
                server.create_initialization_options(),
            )


async def serve_on_stdio(server: Server[Any], *, reads: HandshakeReads | None = None) -> None:
    """Serve ``server`` on the process's stdin and stdout until the host closes stdin."""
    host = HostStdio()
    await host.open()
    try:
        with _diverted_std_fds():
            await serve_lines(server, host, reads=reads)
    finally:
        await host.close()

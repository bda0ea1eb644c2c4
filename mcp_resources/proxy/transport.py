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
from collections.abc import Mapping, Sequence
from typing import Protocol

from mcp_resources.stdio import LINE_LIMIT, HostStdio, read_line

__all__ = ["LINE_LIMIT", "Channel", "HostStdio", "StdioUpstream", "Upstream"]

logger = logging.getLogger("mcp_resources.proxy")


class Channel(Protocol):
    async def receive(self) -> bytes | None:
        """The next message, or None at the end."""

    async def send(self, message: bytes) -> None: ...


class Upstream(Channel, Protocol):
    description: str

    async def start(self) -> None: ...

    async def close(self) -> None:
        """Stop sending; end the upstream (politely first)."""

    def exit_status(self) -> int | None: ...

    async def finished(self) -> None:
        """Wait until the upstream has ended (a child process exits)."""


class StdioUpstream:
    """An upstream MCP server run as a child process; its stderr goes to ours."""

    def __init__(self, command: Sequence[str], env: Mapping[str, str] | None = None) -> None:
        self.command = list(command)
        self.env = dict(env) if env is not None else None
        self.description = os.path.basename(self.command[0])
        self._process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self._process = await asyncio.create_subprocess_exec(
            *self.command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=self.env,
            limit=LINE_LIMIT,
        )

    async def receive(self) -> bytes | None:
        assert self._process is not None
        assert self._process.stdout is not None
        return await read_line(self._process.stdout)

    async def send(self, message: bytes) -> None:
        assert self._process is not None
        assert self._process.stdin is not None
        stdin = self._process.stdin
        if stdin.is_closing():
            raise ConnectionResetError("upstream stdin is closed")
        stdin.write(message + b"\n")
        await stdin.drain()

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

"""Fixtures for the proxy's end-to-end tests: real upstreams (npm servers, a Python server) as children.

The npm upstreams and the TypeScript SDK client are pinned in ``tests/proxy/js`` and installed by ``.ci/run``
(``npm ci --prefix tests/proxy/js``). :class:`RawPeer` speaks newline-delimited JSON-RPC to a process and
returns the lines it receives untouched, so a proxied result can be compared byte for byte with a direct one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, Final

import pytest
from mcp.client.stdio import StdioServerParameters

from blobstore.config import Settings
from blobstore.models import Caller
from blobstore.runtime import open_service
from tests.fixtures.server import BLOBSTORE
from tests.proxy.offload_fixtures import Rig, open_rig

HERE: Final = Path(__file__).parent
JS: Final = HERE / "js"
NODE_MODULES: Final = JS / "node_modules" / "@modelcontextprotocol"
FILESYSTEM_SERVER: Final = NODE_MODULES / "server-filesystem" / "dist" / "index.js"
EVERYTHING_SERVER: Final = NODE_MODULES / "server-everything" / "dist" / "index.js"
PYTHON_UPSTREAM: Final = [sys.executable, str(HERE / "upstream_server.py")]
RAW_UPSTREAM: Final = [sys.executable, str(HERE / "raw_upstream.py")]
"""The hand-written upstream of the large and hostile messages (``raw_upstream.py``)."""
TIMEOUT: Final = 120.0
NAMESPACE: Final = "default"


def blobstore_command() -> str:
    return BLOBSTORE


def node() -> str:
    return "node"


def filesystem_upstream(root: Path) -> list[str]:
    return [node(), str(FILESYSTEM_SERVER), str(root)]


def everything_upstream() -> list[str]:
    return [node(), str(EVERYTHING_SERVER), "stdio"]


def proxy_args(data_dir: Path, upstream: Sequence[str], *options: str) -> list[str]:
    return ["proxy", "--data-dir", str(data_dir), "--namespace", NAMESPACE, *options, "--", *upstream]


def proxy_command(data_dir: Path, upstream: Sequence[str], *options: str) -> list[str]:
    return [blobstore_command(), *proxy_args(data_dir, upstream, *options)]


def proxy_params(data_dir: Path, upstream: Sequence[str], *options: str) -> StdioServerParameters:
    return StdioServerParameters(command=blobstore_command(), args=proxy_args(data_dir, upstream, *options))


def direct_params(upstream: Sequence[str]) -> StdioServerParameters:
    return StdioServerParameters(command=upstream[0], args=list(upstream[1:]))


def vm_hwm(pid: int) -> int:
    """The peak resident set of a live process (``VmHWM``), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM in /proc/{pid}/status")


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture(scope="session")
def npm_servers() -> None:
    """The npm upstreams must be installed; a missing install is a failure, not a skip."""
    missing = [p for p in (FILESYSTEM_SERVER, EVERYTHING_SERVER) if not p.exists()]
    assert not missing, f"run `npm ci --prefix {JS}` first (.ci/run does): missing {missing}"


class RawPeer:
    """A JSON-RPC peer over a child's stdin/stdout that keeps every received line as bytes."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.process.stdout is not None
        while True:
            line = await self.process.stdout.readline()
            if not line:
                await self.lines.put(None)
                return
            if line.strip():
                await self.lines.put(line.rstrip(b"\r\n"))

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        await self.process.stdin.drain()

    async def next_line(self) -> bytes | None:
        return await asyncio.wait_for(self.lines.get(), TIMEOUT)

    async def response(self, ident: Any, *, answer: dict[str, Any] | None = None) -> bytes:
        """The raw line of the response to ``ident`` (server requests meanwhile get ``answer``)."""
        while True:
            line = await self.next_line()
            assert line is not None, "the peer closed before answering"
            message = json.loads(line)
            if message.get("id") == ident and "method" not in message:
                return line
            if "method" in message and "id" in message and answer is not None:
                await self.send({"jsonrpc": "2.0", "id": message["id"], "result": answer})

    async def request(self, ident: Any, method: str, params: dict[str, Any] | None = None) -> bytes:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)
        return await self.response(ident)

    async def handshake(self, capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
        line = await self.request(
            0,
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": capabilities if capabilities is not None else {"sampling": {}, "roots": {}},
                "clientInfo": {"name": "raw-peer", "version": "1.0"},
            },
        )
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        result: dict[str, Any] = json.loads(line)["result"]
        return result

    async def close(self) -> int:
        if self.process.stdin is not None and not self.process.stdin.is_closing():
            self.process.stdin.close()
        try:
            return await asyncio.wait_for(self.process.wait(), TIMEOUT)
        finally:
            self._reader.cancel()


@contextlib.asynccontextmanager
async def raw_peer(command: Sequence[str], *, stderr: int | None = None) -> AsyncIterator[RawPeer]:
    process = await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=stderr,
        limit=256 * 1024 * 1024,
        env={**os.environ},
    )
    peer = RawPeer(process)
    try:
        yield peer
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(process.wait(), TIMEOUT)
        peer._reader.cancel()


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    async with open_rig(tmp_path) as made:
        yield made


async def call(
    peer: RawPeer, ident: Any, name: str, arguments: dict[str, Any] | None = None
) -> dict[str, Any]:
    """``tools/call`` of ``name`` through ``peer``; the answer."""
    line = await peer.request(ident, "tools/call", {"name": name, "arguments": arguments or {}})
    answer: dict[str, Any] = json.loads(line)
    return answer


async def stored(data_dir: Path) -> list[Any]:
    """The artifacts the proxy stored in ``data_dir``."""
    async with open_service(Settings(data_dir=data_dir)) as service:
        page = await service.list_artifacts(Caller(namespace=NAMESPACE), limit=100)
        return list(page.items)


def link_of(answer: dict[str, Any]) -> dict[str, Any]:
    """The one ``resource_link`` of a tool answer."""
    links: list[dict[str, Any]] = [b for b in answer["result"]["content"] if b["type"] == "resource_link"]
    assert len(links) == 1, answer
    return links[0]


@pytest.fixture
def small_cap(monkeypatch: pytest.MonkeyPatch) -> int:
    """A message cap of 4 MiB for the proxies the test starts."""
    cap = 4 * 1024 * 1024
    monkeypatch.setenv("BLOBSTORE_PROXY_MAX_MESSAGE_BYTES", str(cap))
    return cap

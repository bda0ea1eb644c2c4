"""Peak memory of ``blobstore proxy`` while an upstream answers tool calls with very large results.

Starts ``blobstore proxy`` (fresh data directory) in front of the tests' hand-written upstream
(``tests/proxy/raw_upstream.py``, tool ``big``: a deterministic payload written in pieces, one JSON-RPC line
per result), makes the calls of each scenario at once, waits for every answer (each must be the short
result with a ``resource_link``) and reads the proxy process's ``VmHWM`` (peak resident set) from
``/proc/<pid>/status``: once after the handshake, once after the answers.

    .venv/bin/python bench/proxy_memory.py                      # 1 x 400 MB, then 4 x 100 MB at once
    .venv/bin/python bench/proxy_memory.py --scenario 1x400 --kind text
    .venv/bin/python bench/proxy_memory.py --scenario 2x50 --scenario 1x10
    .venv/bin/python bench/proxy_memory.py --transport sse --transport json

``--transport`` (repeatable; default ``stdio`` then ``sse``) picks how the upstream is reached: a child on
stdio, or ``raw_upstream.py --http`` behind ``--upstream-url``, answering in server-sent events (``sse``) or
JSON bodies (``json``), every answer a chunked body.

Scenarios are ``<calls>x<megabytes>`` (MB = 10^6 bytes of payload; the line carries its base64, 4/3 of
that); ``--kind`` is ``image`` (default), ``audio``, ``blob`` or ``text``. The goal: a peak under 200 MiB
for 1 x 400 MB and for 4 x 100 MB. Needs Linux (``/proc``). Not run by the test suite.

Measured on the development machine (2 cores, local disk, SQLite), ``--kind image``
(``.venv/bin/python bench/proxy_memory.py --transport stdio --transport sse --transport json``):

===========================  =================  ================  ==========
scenario                     VmHWM after start  VmHWM at the end  wall time
===========================  =================  ================  ==========
stdio: 1 x 400 MB            111 MiB            135 MiB           5.2 s
stdio: 4 x 100 MB at once    111 MiB            137 MiB           5.3 s
sse: 1 x 400 MB              115 MiB            124 MiB           8.4 s
sse: 4 x 100 MB at once      115 MiB            141 MiB           9.0 s
json: 1 x 400 MB             115 MiB            127 MiB           7.6 s
json: 4 x 100 MB at once     115 MiB            142 MiB           8.2 s
===========================  =================  ================  ==========

``--scenario 1x100 --kind text`` (a text of 100 MB, an escaped line end every 57 bytes): 110 MiB to
139 MiB in 10.0 s. The figures move by a few MiB and by seconds between runs on a shared machine.
Before the incremental reader, one 100 MiB image took the proxy from 110 MiB to 762 MiB on stdio; before the
HTTP upstream used it, 1 x 400 MB took it from 115 MiB to 3155 MiB over SSE and 3021 MiB over JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parent.parent
UPSTREAM: Final = ROOT / "tests" / "proxy" / "raw_upstream.py"
BLOBSTORE: Final = shutil.which("blobstore", path=str(Path(sys.executable).parent)) or "blobstore"
MB: Final = 1_000_000
MiB: Final = 1024 * 1024
TIMEOUT: Final = 900.0


def peak_rss(pid: int) -> int:
    """``VmHWM`` of a live process, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmHWM in /proc/{pid}/status")


class Peer:
    """Newline-delimited JSON-RPC over the proxy's stdin and stdout."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.answers: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.process.stdout is not None
        while line := await self.process.stdout.readline():
            message = json.loads(line)
            future = self.answers.get(message.get("id"))
            if future is not None and "method" not in message and not future.done():
                future.set_result(message)

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        await self.process.stdin.drain()

    def expect(self, ident: Any) -> asyncio.Future[dict[str, Any]]:
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.answers[ident] = future
        return future

    async def request(self, ident: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
        future = self.expect(ident)
        await self.send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        return await asyncio.wait_for(future, TIMEOUT)


@contextlib.asynccontextmanager
async def upstream_args(transport: str) -> AsyncIterator[list[str]]:
    """The proxy's arguments naming the upstream: its command (stdio), or the URL it serves on."""
    if transport == "stdio":
        yield ["--", sys.executable, str(UPSTREAM)]
        return
    server = await asyncio.create_subprocess_exec(
        sys.executable, str(UPSTREAM), "--http", "0", f"--{transport}", stdout=asyncio.subprocess.PIPE
    )
    try:
        assert server.stdout is not None
        line = (await server.stdout.readline()).decode()
        if not line.startswith("listening on "):
            raise RuntimeError(f"the HTTP upstream did not start: {line!r}")
        yield ["--upstream-url", f"http://127.0.0.1:{int(line.split()[-1])}/mcp"]
    finally:
        server.kill()
        await server.wait()


async def scenario(calls: int, megabytes: int, kind: str, transport: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="proxy-memory-") as tmp:
        async with upstream_args(transport) as upstream:
            command = [BLOBSTORE, "proxy", "--data-dir", str(Path(tmp) / "data"), *upstream]
            return await measure(command, calls, megabytes, kind)


async def measure(command: list[str], calls: int, megabytes: int, kind: str) -> dict[str, Any]:
    process = await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        limit=16 * MiB,
        env={**os.environ, "BLOBSTORE_PROXY_MAX_MESSAGE_BYTES": str(1024 * MiB)},
    )
    peer = Peer(process)
    try:
        hello = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"},
        }
        await peer.request(0, "initialize", hello)
        await peer.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        await peer.request("warm", "tools/list", {})
        started_peak = peak_rss(process.pid)
        started = time.monotonic()
        size = megabytes * MB
        futures = [peer.expect(i) for i in range(1, calls + 1)]
        for i in range(1, calls + 1):
            arguments = {"size": size, "kind": kind}
            params = {"name": "big", "arguments": arguments}
            await peer.send({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params})
        answers = await asyncio.wait_for(asyncio.gather(*futures), TIMEOUT)
        elapsed = time.monotonic() - started
        end_peak = peak_rss(process.pid)
        for answer in answers:
            content = answer.get("result", {}).get("content", [])
            if not any(block.get("type") == "resource_link" for block in content):
                raise RuntimeError(f"no resource_link in the answer: {json.dumps(answer)[:300]}")
        return {"start": started_peak, "end": end_peak, "seconds": elapsed}
    finally:
        peer.reader.cancel()
        if process.stdin is not None:
            process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), 30)
        except TimeoutError:
            process.kill()
            await process.wait()


def parse_scenario(text: str) -> tuple[int, int]:
    calls, _, megabytes = text.partition("x")
    return int(calls), int(megabytes)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", action="append", type=parse_scenario, help="<calls>x<MB>, repeatable")
    parser.add_argument("--kind", default="image", choices=["image", "audio", "blob", "text"])
    parser.add_argument(
        "--transport",
        action="append",
        choices=["stdio", "sse", "json"],
        help="repeatable; default stdio, sse",
    )
    args = parser.parse_args()
    scenarios = args.scenario or [(1, 400), (4, 100)]
    transports = args.transport or ["stdio", "sse"]
    print(f"{'scenario':<30}{'VmHWM after start':>20}{'VmHWM at the end':>20}{'wall time':>12}")
    for transport in transports:
        for calls, megabytes in scenarios:
            figures = await scenario(calls, megabytes, args.kind, transport)
            label = f"{transport}: {calls} x {megabytes} MB" + (" at once" if calls > 1 else "")
            print(
                f"{label:<30}{figures['start'] / MiB:>16.0f} MiB{figures['end'] / MiB:>16.0f} MiB"
                f"{figures['seconds']:>10.1f} s"
            )


if __name__ == "__main__":
    asyncio.run(main())

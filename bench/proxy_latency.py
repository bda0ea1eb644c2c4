"""Added latency of ``blobstore proxy`` for a small tool call that passes through unchanged.

Starts an upstream MCP server on stdio twice, once directly and once behind ``blobstore proxy`` (fresh data
directory), does the 2025-11-25 handshake on each with a raw newline-delimited JSON-RPC client, then times
``--calls`` sequential ``tools/call`` round trips (after ``--warmup`` untimed ones) on each, alternating
direct and proxied in blocks so load on the machine hits both alike. Prints p50/p90/p99 per path and the
difference of the medians.

    .venv/bin/python bench/proxy_latency.py --calls 1000
    .venv/bin/python bench/proxy_latency.py --upstream filesystem   # list_allowed_directories

The default upstream is the tests' Python server (``tests/proxy/upstream_server.py``, tool ``echo``);
``filesystem`` needs ``npm ci --prefix tests/proxy/js``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BLOBSTORE = str(Path(sys.executable).with_name("blobstore"))
FILESYSTEM = ROOT / "tests/proxy/js/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"


class Peer:
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.next_id = 0

    async def call(self, method: str, params: dict[str, Any]) -> bytes:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.next_id += 1
        ident = self.next_id
        line = json.dumps({"jsonrpc": "2.0", "id": ident, "method": method, "params": params}).encode()
        self.process.stdin.write(line + b"\n")
        await self.process.stdin.drain()
        while True:
            answer = await self.process.stdout.readline()
            if not answer:
                raise RuntimeError("the server closed")
            message = json.loads(answer)
            if message.get("id") == ident and "method" not in message:
                return answer

    async def handshake(self) -> None:
        await self.call(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "proxy-latency", "version": "1"},
            },
        )
        assert self.process.stdin is not None
        self.process.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        await self.process.stdin.drain()

    async def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        await self.process.wait()


async def start(command: list[str]) -> Peer:
    process = await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        limit=64 * 1024 * 1024,
    )
    peer = Peer(process)
    await peer.handshake()
    return peer


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--block", type=int, default=50, help="calls per path before switching")
    parser.add_argument("--upstream", choices=["python", "filesystem"], default="python")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        if args.upstream == "python":
            upstream = [sys.executable, str(ROOT / "tests/proxy/upstream_server.py")]
            call = ("tools/call", {"name": "echo", "arguments": {"text": "ping"}})
        else:
            upstream = ["node", str(FILESYSTEM), tmp]
            call = ("tools/call", {"name": "list_allowed_directories", "arguments": {}})
        proxy = [BLOBSTORE, "proxy", "--data-dir", str(Path(tmp) / "data"), "--", *upstream]
        peers = {"direct": await start(upstream), "proxied": await start(proxy)}
        for peer in peers.values():
            for _ in range(args.warmup):
                await peer.call(*call)
        times: dict[str, list[float]] = {name: [] for name in peers}
        done = 0
        while done < args.calls:
            block = min(args.block, args.calls - done)
            for name, peer in peers.items():
                for _ in range(block):
                    started = time.perf_counter()
                    await peer.call(*call)
                    times[name].append((time.perf_counter() - started) * 1000)
            done += block
        for peer in peers.values():
            await peer.close()

    print(f"upstream: {args.upstream}; {args.calls} calls per path after {args.warmup} warm-up calls")
    print(f"{'path':<8} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'mean ms':>8}")
    for name, values in times.items():
        print(
            f"{name:<8} {percentile(values, 0.5):8.3f} {percentile(values, 0.9):8.3f} "
            f"{percentile(values, 0.99):8.3f} {statistics.fmean(values):8.3f}"
        )
    added50 = percentile(times["proxied"], 0.5) - percentile(times["direct"], 0.5)
    added99 = percentile(times["proxied"], 0.99) - percentile(times["direct"], 0.99)
    print(f"added by the proxy: p50 {added50:.3f} ms, p99 {added99:.3f} ms")


if __name__ == "__main__":
    asyncio.run(main())

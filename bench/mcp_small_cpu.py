"""Server CPU and latency of 4 KiB ``resources/read`` over stdio, for checkouts side by side, alternating.

Each checkout (its own ``.venv``) runs ``blobstore mcp`` on one shared data directory holding one 4 KiB
artifact; the suite's minimal JSON-RPC client (``mcp_read.RawStdioClient``) reads it ``--reads`` times per
run from each server in turn (the order rotates), and reports the server's CPU per read (user + system of the
``blobstore mcp`` process from ``/proc/<pid>/stat``) and the median latency. ``--peer`` adds
server-filesystem reading a 4 KiB file (latency only; its CPU is shown too). Run 0 warms up and is not
counted. Usage (Linux)::

    .venv/bin/python bench/mcp_small_cpu.py BASE_TREE BRANCH_TREE [--runs 5] [--reads 2000] [--peer]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

from harness import PEER_DIR
from mcp_client import RawStdioClient

from blobstore.config import Settings
from blobstore.models import Caller
from blobstore.runtime import open_service

SMALL = 4 * 1024


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def make_artifact(data_dir: Path, payload: bytes) -> str:
    async with open_service(Settings(data_dir=data_dir, mcp_namespace="default")) as service:

        async def body() -> AsyncIterator[bytes]:
            yield payload

        artifact = await service.create_artifact(
            Caller(namespace="default", actor="bench"),
            body(),
            name="small.bin",
            mime_type="application/octet-stream",
            expected_size=len(payload),
        )
        return artifact.id


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", type=Path, nargs="+", help="checkouts, each with its .venv")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--reads", type=int, default=2000)
    parser.add_argument("--peer", action="store_true", help="also time server-filesystem on a 4 KiB file")
    args = parser.parse_args()
    payload = os.urandom(SMALL)
    with tempfile.TemporaryDirectory() as work_dir:
        work = Path(work_dir)
        data_dir = work / "data"
        artifact_id = asyncio.run(make_artifact(data_dir, payload))
        (work / "small.bin").write_bytes(payload)
        clients: dict[str, tuple[RawStdioClient, object]] = {}
        for tree in args.trees:
            argv = [str(tree / ".venv/bin/blobstore"), "mcp", "--data-dir", str(data_dir)]
            client = RawStdioClient(argv)
            clients[str(tree)] = (client, client.window_reader(f"blobstore://artifacts/{artifact_id}", False))
        if args.peer:
            client = RawStdioClient(["node", str(PEER_DIR / "dist" / "index.js"), str(work)])
            clients["server-filesystem"] = (client, client.media_reader(work / "small.bin"))
        rows: dict[str, list[str]] = {name: [] for name in clients}
        try:
            names = list(clients)
            for run in range(args.runs + 1):
                shift = run % len(names)
                for name in names[shift:] + names[:shift]:
                    client, read = clients[name]
                    pid = client.process.pid
                    count = args.reads if run else args.reads // 4
                    seconds = []
                    cpu_before = cpu_seconds(pid)
                    for _ in range(count):
                        started = time.perf_counter()
                        data = read()  # type: ignore[operator]
                        seconds.append(time.perf_counter() - started)
                        if data != payload:
                            raise SystemExit(f"{name}: the read returned other bytes")
                    cpu = (cpu_seconds(pid) - cpu_before) / count * 1000
                    if run:
                        rows[name].append(f"{cpu:.3f} ms CPU, {statistics.median(seconds) * 1000:.3f} ms p50")
        finally:
            for client, _ in clients.values():
                client.close()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{args.reads} reads of 4 KiB per run, {args.runs} runs after a warm-up; load average {load}")
    for name, cells in rows.items():
        print(f"{name}:")
        for cell in cells:
            print(f"  {cell}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()

"""CPU of the app's own request path per 64 KiB range read, called in process: no server, socket or client.

Under ``wrk`` on this 2-vCPU machine the server's CPU per range swings by a third between runs of the same
code (docs/performance.md, "What this machine does to the figures"); a change of a few per cent cannot be
seen there. This calls the ASGI app itself, as an ASGI server would, with random 64 KiB ``Range`` reads of one
artifact on local disk and SQLite (the defaults of ``blobstore serve``), and prints the process CPU per
request of each round and their median. Everything of the store's path is in it: authentication, the lookup,
the checked read, the answer, the audit and access lines, metrics. granian's own work and the thread
handoffs around it are not::

    .venv/bin/python bench/inprocess_reads.py                  # 5 rounds of 3,000 reads
    .venv/bin/python bench/inprocess_reads.py --rounds 3 --requests 1000
    PYTHONPATH=/path/to/other/checkout .venv/bin/python bench/inprocess_reads.py   # that checkout's code
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, TextIO

import httpx
import uvloop
from inprocess_app import http_scope, quiet_app

RANGE = 64 * 1024
PAYLOAD = 64 * 1024 * 1024
WARM_UP = 500


def range_scope(artifact_id: str, offset: int) -> dict[str, Any]:
    headers = [(b"user-agent", b"bench"), (b"range", f"bytes={offset}-{offset + RANGE - 1}".encode())]
    return http_scope("GET", f"/v1/artifacts/{artifact_id}/content", b"", headers)


async def measure(data_dir: Path, requests: int, rounds: int, quiet: TextIO) -> list[float]:
    app = quiet_app(data_dir, quiet)
    statuses: list[int] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(app.router.lifespan_context(app))
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 40000))
        http = await stack.enter_async_context(
            httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1")
        )
        created = await http.post("/v1/artifacts", params={"name": "ranges.bin"}, content=os.urandom(PAYLOAD))
        created.raise_for_status()
        artifact_id = created.json()["id"]
        rng = random.Random(7)
        slots = (PAYLOAD - RANGE) // 4096

        async def one() -> None:
            await app(range_scope(artifact_id, rng.randrange(slots) * 4096), receive, send)

        for _ in range(WARM_UP):
            await one()
        per_request: list[float] = []
        for _ in range(rounds):
            started = time.process_time()
            for _ in range(requests):
                await one()
            per_request.append((time.process_time() - started) / requests * 1e6)
    if set(statuses) != {206}:
        raise SystemExit(f"expected only 206 answers, got {sorted(set(statuses))}")
    return per_request


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=3000, help="range reads per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if args.requests < 1 or args.rounds < 1:
        parser.error("--requests and --rounds must be at least 1")
    with (
        tempfile.TemporaryDirectory(prefix="inprocess-reads-") as work,
        open(os.devnull, "w") as quiet,
    ):
        # The event loop `blobstore serve` runs on (granian picks uvloop, installed with uvicorn[standard]).
        rounds = uvloop.run(measure(Path(work), args.requests, args.rounds, quiet))
    shown = ", ".join(f"{value:.1f}" for value in rounds)
    print(
        f"CPU per 64 KiB range read, in process: rounds {shown} µs; median {statistics.median(rounds):.1f} µs"
    )
    sys.stdout.flush()


if __name__ == "__main__":
    main()

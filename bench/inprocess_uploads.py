"""Time and CPU of one large single-request upload through the app itself: no server, socket or client.

The body arrives as granian hands it over, in 128 KiB messages, already waiting (the client is never the
bound here). Each upload is new content written to local disk and recorded in SQLite (the defaults of
``blobstore serve``), checked and fsynced as always. Printed per upload: wall time, the CPU of the event-loop
thread (receiving, guarding and batching the body) and of the whole process (hashing and writing in worker
threads too); then the medians::

    .venv/bin/python bench/inprocess_uploads.py                        # 5 uploads of 256 MiB
    .venv/bin/python bench/inprocess_uploads.py --uploads 3 --size-mib 64 --data-dir /dev/shm
    PYTHONPATH=/path/to/other/checkout .venv/bin/python bench/inprocess_uploads.py   # that checkout's code

``--data-dir`` on a tmpfs takes the disk out of the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, TextIO

import uvloop
from inprocess_app import http_scope, quiet_app

MiB = 1024 * 1024
PIECE = 128 * 1024


def upload_scope(size: int) -> dict[str, Any]:
    headers = [(b"content-type", b"application/octet-stream"), (b"content-length", str(size).encode())]
    return http_scope("POST", "/v1/artifacts", b"name=payload.bin", headers)


async def one_upload(app: Any, size: int, pieces: list[bytes]) -> tuple[float, float, float]:
    """Upload ``size`` bytes of new content; wall, event-loop thread and process seconds."""
    first = os.urandom(PIECE)  # new content every upload: nothing is deduplicated
    count = -(-size // PIECE)
    bodies = [first, *(pieces[index % len(pieces)] for index in range(1, count))]
    bodies[-1] = bodies[-1][: size - (count - 1) * PIECE]
    expected = hashlib.sha256()
    for body in bodies:  # before the timed part: the loop thread's figure is the app's own
        expected.update(body)
    sent = 0
    answers: list[bytes] = []
    statuses: list[int] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        sent += 1
        return {"type": "http.request", "body": bodies[sent - 1], "more_body": sent < count}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])
        elif message["type"] == "http.response.body":
            answers.append(message.get("body", b""))

    wall, thread, process = time.perf_counter(), time.thread_time(), time.process_time()
    await app(upload_scope(size), receive, send)
    spent = (time.perf_counter() - wall, time.thread_time() - thread, time.process_time() - process)
    if statuses != [201] or json.loads(b"".join(answers))["sha256"] != expected.hexdigest():
        raise SystemExit(f"the upload was not stored as sent: {statuses}")
    return spent


async def measure(data_dir: Path, uploads: int, size: int, quiet: TextIO) -> list[tuple[float, float, float]]:
    app = quiet_app(data_dir, quiet)
    pieces = [os.urandom(PIECE) for _ in range(16)]
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(app.router.lifespan_context(app))
        await one_upload(app, size, pieces)  # warms up
        return [await one_upload(app, size, pieces) for _ in range(uploads)]


def _seconds(wall: float, thread: float, process: float) -> str:
    return f"wall {wall:.3f} s, event-loop thread {thread:.3f} s, process {process:.3f} s"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--uploads", type=int, default=5)
    parser.add_argument("--size-mib", type=int, default=256)
    parser.add_argument("--data-dir", type=Path, default=None, help="where the store's data directory goes")
    args = parser.parse_args()
    if args.uploads < 1 or args.size_mib < 1:
        parser.error("--uploads and --size-mib must be at least 1")
    with (
        tempfile.TemporaryDirectory(prefix="inprocess-uploads-", dir=args.data_dir) as work,
        open(os.devnull, "w") as quiet,
    ):
        # The event loop `blobstore serve` runs on (granian picks uvloop, installed with uvicorn[standard]).
        results = uvloop.run(measure(Path(work), args.uploads, args.size_mib * MiB, quiet))
    for wall, thread, process in results:
        print(f"upload of {args.size_mib} MiB: {_seconds(wall, thread, process)}")
    walls, threads, processes = zip(*results, strict=True)
    medians = (statistics.median(walls), statistics.median(threads), statistics.median(processes))
    print(f"median: {_seconds(*medians)}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()

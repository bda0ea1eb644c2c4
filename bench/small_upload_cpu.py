"""Server CPU per durable 1 KiB upload: the figure the 1 KiB upload changes are judged by on a loaded machine.

Starts ``blobstore serve`` (this checkout's), uploads the same 1 KiB body ``--count`` times with 16 requests
in flight (httpx, as ``bench/run.py --only small`` does) after a warm-up, and prints the rate and the user +
system CPU of the serve process tree per upload. With ``--strace``, counts the storage system calls of every
serve process over the run instead (strace slows the server, so the rate and CPU of that run mean little)::

    .venv/bin/python bench/small_upload_cpu.py --count 2000
    .venv/bin/python bench/small_upload_cpu.py --count 1000 --strace
    .venv/bin/python bench/small_upload_cpu.py --count 2000 --distinct   # new content every time
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
from harness import blobstore_serve, cpu_seconds, process_tree

IN_FLIGHT = 16
WARM_UP = 200
SYSCALLS = "fsync,fdatasync,mkdir,link,openat"


async def upload(base: str, count: int, tag: str, *, distinct: bool = False) -> float:
    """Uploads per second of ``count`` copies of one 1 KiB body (``distinct``: a new body each)."""
    body = os.urandom(1024)
    numbers = iter(range(count))
    limits = httpx.Limits(max_connections=IN_FLIGHT, max_keepalive_connections=IN_FLIGHT)
    async with httpx.AsyncClient(limits=limits, timeout=60) as client:

        async def worker() -> None:
            for number in numbers:
                content = os.urandom(1024) if distinct else body
                response = await client.post(f"{base}/v1/artifacts?name={tag}-{number}.bin", content=content)
                response.raise_for_status()

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
        return count / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=2000, help="measured uploads")
    parser.add_argument("--strace", action="store_true", help=f"count {SYSCALLS} per upload instead")
    parser.add_argument(
        "--distinct", action="store_true", help="a new random body per upload (no upload is a duplicate)"
    )
    args = parser.parse_args()
    strace = shutil.which("strace")
    if args.strace and strace is None:
        parser.error("strace is not installed (apt-get install -y strace)")
    with tempfile.TemporaryDirectory(prefix="small-cpu-") as tmp, blobstore_serve(Path(tmp)) as ours:
        asyncio.run(upload(ours.base, WARM_UP, "warm"))
        tracer: subprocess.Popen[bytes] | None = None
        counts = Path(tmp) / "strace.txt"
        if args.strace and strace is not None:
            attach = [arg for pid in process_tree(ours.pid) for arg in ("-p", str(pid))]
            command = [strace, "-f", "-c", "-o", str(counts), "-e", f"trace={SYSCALLS}", *attach]
            tracer = subprocess.Popen(command, stderr=subprocess.DEVNULL)
            time.sleep(1.0)  # attached before the first measured request
        before = cpu_seconds(ours.pid)
        rate = asyncio.run(upload(ours.base, args.count, "measured", distinct=args.distinct))
        cpu_ms = (cpu_seconds(ours.pid) - before) * 1000 / args.count
        if tracer is not None:
            tracer.send_signal(signal.SIGINT)
            tracer.wait()
            print(counts.read_text())
    load = os.getloadavg()[0]
    print(f"{rate:.0f} uploads/s, server CPU {cpu_ms:.2f} ms per upload, load average {load:.1f}")


if __name__ == "__main__":
    main()

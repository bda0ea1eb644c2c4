"""The clients the benchmarks drive servers with (curl, wrk, httpx), the payload they send, and the CPU time
of the clients run from this process."""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import resource
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

KiB = 1024
MiB = 1024 * KiB


def write_random_file(path: Path, size: int) -> str:
    """Write ``size`` random bytes to ``path``; their SHA-256."""
    digest = hashlib.sha256()
    with path.open("wb") as out:
        remaining = size
        while remaining:
            block = os.urandom(min(remaining, 8 * MiB))
            out.write(block)
            digest.update(block)
            remaining -= len(block)
    return digest.hexdigest()


@dataclass
class Payload:
    path: Path
    size: int
    sha256: str

    def slice(self, offset: int, length: int) -> bytes:
        with self.path.open("rb") as source:
            source.seek(offset)
            return source.read(length)


def make_payload(path: Path, size: int) -> Payload:
    return Payload(path, size, write_random_file(path, size))


def curl(*args: str) -> tuple[str, float]:
    """Run curl; (body written to stdout, seconds of the transfer as curl measured it)."""
    result = subprocess.run(
        ["curl", "-sS", "--fail-with-body", *args, "-w", "\n%{time_total}"],
        check=True,
        capture_output=True,
        text=True,
    )
    body, _, seconds = result.stdout.rpartition("\n")
    return body, float(seconds)


def download_mib_s(url: str, size: int) -> float:
    result = subprocess.run(
        ["curl", "-sS", "--fail", "-o", "/dev/null", "-w", "%{size_download} %{time_total}", url],
        check=True,
        capture_output=True,
        text=True,
    )
    written, seconds = result.stdout.split()
    if int(written) != size:
        raise SystemExit(f"{url}: {written} bytes, expected {size}")
    return size / MiB / float(seconds)


def sha256_of_url(url: str) -> str:
    digest = hashlib.sha256()
    with subprocess.Popen(["curl", "-sS", url], stdout=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        while block := proc.stdout.read(MiB):
            digest.update(block)
    return digest.hexdigest()


WRK_SCRIPT = """
math.randomseed(%(seed)d)
request = function()
  local offset = math.random(0, %(slots)d) * 4096
  return wrk.format("GET", nil, {["Range"] = "bytes=" .. offset .. "-" .. (offset + %(length)d - 1)})
end
"""


def wrk_ranges(
    url: str, size: int, length: int, seconds: int, connections: int, script_dir: Path
) -> tuple[float, int]:
    """(requests per second, requests done) of random ``length``-byte ranges at 4 KiB offsets."""
    script = script_dir / "ranges.lua"
    slots = (size - length) // 4096
    script.write_text(WRK_SCRIPT % {"seed": random.randrange(1 << 30), "slots": slots, "length": length})
    result = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "-s", str(script), url],
        check=True,
        capture_output=True,
        text=True,
    )
    if "Non-2xx" in result.stdout:
        raise SystemExit(f"wrk against {url}: non-2xx answers\n{result.stdout}")
    lines = result.stdout.splitlines()
    rate = next(line for line in lines if line.startswith("Requests/sec:"))
    done = next(line for line in lines if " requests in " in line)
    return float(rate.split()[1]), int(done.split()[0])


async def small_uploads(url: Callable[[int], str], method: str, count: int, in_flight: int) -> float:
    """Uploads per second of ``count`` 1 KiB bodies with ``in_flight`` requests at a time.

    Every body is new content (a tool server's screenshots differ from step to step): a body the store already
    holds would be deduplicated without being written, which is not the durable write this row measures.
    """
    bodies = [os.urandom(KiB) for _ in range(count)]
    queue = iter(range(count))
    limits = httpx.Limits(max_connections=in_flight, max_keepalive_connections=in_flight)
    async with httpx.AsyncClient(limits=limits, timeout=60) as client:

        async def worker() -> None:
            for number in queue:
                response = await client.request(method, url(number), content=bodies[number])
                response.raise_for_status()

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(in_flight)))
        return count / (time.perf_counter() - started)


def own_cpu() -> float:
    """User + system CPU time of this process so far (the clients it runs in process)."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def children_cpu() -> float:
    """User + system CPU time of this process's finished children (the clients it ran) so far."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime

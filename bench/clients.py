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
from dataclasses import dataclass, field
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


def run_wrk(url: str, script: Path, seconds: int, connections: int) -> tuple[float, int, int]:
    """(requests per second, requests done, socket errors) of ``wrk -t1`` with the Lua ``script``; every
    answer must be 2xx."""
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
    # "Socket errors: connect 0, read 0, write 0, timeout 0", only when there were any.
    errors = next((line for line in lines if "Socket errors:" in line), "")
    failed = sum(int(part.split()[-1]) for part in errors.partition(":")[2].split(",") if part.strip())
    return float(rate.split()[1]), int(done.split()[0]), failed


def wrk_ranges(
    url: str, size: int, length: int, seconds: int, connections: int, script_dir: Path
) -> tuple[float, int]:
    """(requests per second, requests done) of random ``length``-byte ranges at 4 KiB offsets."""
    script = script_dir / "ranges.lua"
    slots = (size - length) // 4096
    script.write_text(WRK_SCRIPT % {"seed": random.randrange(1 << 30), "slots": slots, "length": length})
    rate, done, _ = run_wrk(url, script, seconds, connections)
    return rate, done


WRK_UPLOAD_SCRIPT = """
local base = "%(base)s"
local counter = 0
request = function()
  counter = counter + 1
  local prefix = string.format("%(seed)08x%%08d", counter)
  local path = string.format("%(path)s", counter)
  return wrk.format("%(method)s", path, {}, prefix .. string.sub(base, 17))
end
"""


@dataclass
class WrkUploads:
    """New bodies for ``wrk``: the ``n``-th request (from 1) sends ``body(n)`` to ``path % n``."""

    method: str
    path: str
    """A path with one ``%d``, the request's number."""
    seed: int = field(default_factory=lambda: random.randrange(1 << 32))
    """Its own in every run, so no run repeats another's bodies."""
    base: bytes = field(default_factory=lambda: os.urandom(KiB))

    def body(self, number: int) -> bytes:
        """The 1 KiB body of request ``number``: its first 16 bytes the seed and number, then random bytes."""
        return b"%08x%08d" % (self.seed, number) + self.base[16:]

    def script(self) -> str:
        escaped = "".join(f"\\{byte}" for byte in self.base)  # Lua decimal escapes
        return WRK_UPLOAD_SCRIPT % {
            "base": escaped, "seed": self.seed, "path": self.path, "method": self.method
        }  # fmt: skip


def wrk_uploads(
    base_url: str, uploads: WrkUploads, seconds: int, connections: int, script_dir: Path
) -> tuple[float, int, int]:
    """(uploads per second, uploads answered, socket errors) of ``wrk`` sending a new 1 KiB body every
    request: the seed and the request's number in its first 16 bytes, so no two bodies of any run are
    alike."""
    script = script_dir / "uploads.lua"
    script.write_text(uploads.script())
    return run_wrk(base_url, script, seconds, connections)


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

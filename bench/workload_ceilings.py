"""The ceilings of the suite (``ceilings``): the HTTP workloads against ``bench/bare_app.py`` (no lookup,
check, log or durable write) on the server and settings ``blobstore serve`` uses, next to the same peers, and
SHA-256 of the payload on one core: what any app reaches on this server, client and machine."""

from __future__ import annotations

import asyncio
import hashlib
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from clients import KiB, MiB, Payload, curl, download_mib_s, sha256_of_url, small_uploads, wrk_ranges
from harness import Bare, Row, Targets, cpu_seconds, find_binary, rotations


def sha256_mib_s(payload: Payload) -> float:
    """SHA-256 of the payload on one core (``hashlib``), the file read beforehand into the page cache."""
    digest = hashlib.sha256()
    elapsed = 0.0
    with payload.path.open("rb", buffering=0) as source:
        while block := source.read(8 * MiB):
            started = time.perf_counter()
            digest.update(block)
            elapsed += time.perf_counter() - started
    if digest.hexdigest() != payload.sha256:
        raise SystemExit("sha256 of the payload changed")
    return payload.size / MiB / elapsed


def bench_ceilings(
    t: Targets, bare: Bare, runs: int, seconds: int, small_count: int, work: Path
) -> list[Row]:
    """The suite's HTTP workloads against ``bench/bare_app.py`` (no lookup, check, log or durable write) on
    the server and settings ``blobstore serve`` uses, next to the same peers: what any app reaches there."""
    if sha256_of_url(bare.payload_url) != t.payload.sha256:
        raise SystemExit("bare app: downloaded bytes differ")
    download = Row("ceiling: full download, pathsend of a bare ASGI app", "MiB/s", goal="bounds ours (≥ 0.9)")
    ranges = Row("ceiling: 64 KiB random ranges, one pread in a bare ASGI app", "req/s")
    ranges.goal = "bounds ours (≥ 0.3)"
    upload = Row("ceiling: upload received and dropped by a bare ASGI app, curl -T", "MiB/s")
    upload.goal = "bounds ours (≥ 0.8)"
    hashing = Row("ceiling: SHA-256 of the payload, one core (hashlib)", "MiB/s")
    hashing.goal = "bounds verified uploads (≥ 0.8)"
    small = Row(
        "ceiling: 1 KiB uploads to a bare ASGI app (dropped), 16 in flight, httpx",
        "uploads/s",
        goal="bounds ours (≥ 1,000 absolute)",
    )
    rows = [download, ranges, upload, hashing, small]
    if t.nginx is None:
        for row in rows:
            row.note = "nginx is not installed: no ratio"
    nginx_base = t.nginx.base if t.nginx is not None else ""
    size = t.payload.size

    def put(base: str) -> float:
        _, spent = curl("-T", str(t.payload.path), f"{base}/up/payload.bin")
        return size / MiB / spent

    workloads: list[tuple[Row, Callable[[], float], Callable[[], float] | None]] = [
        (
            download,
            lambda: download_mib_s(bare.payload_url, size),
            (lambda: download_mib_s(f"{nginx_base}/payload.bin", size)) if t.nginx else None,
        ),
        (upload, lambda: put(bare.base), (lambda: put(nginx_base)) if t.nginx else None),
    ]
    for row, ours, peer in workloads:
        sides = {"bare": ours, **({"peer": peer} if peer is not None else {})}
        for run, name in rotations(list(sides), runs + 1):
            value = sides[name]()
            if run:
                (row.ours if name == "bare" else row.peer).append(value)
        row.peer_name = "nginx" if row is download else "nginx PUT"
    if t.nginx is not None:
        (t.nginx.root / "up" / "payload.bin").unlink(missing_ok=True)
    hashing.ours = [sha256_mib_s(t.payload) for _ in range(runs)]
    hashing.peer_name, hashing.peer = "nginx PUT", upload.peer
    if find_binary("wrk") is not None:
        targets = {"bare": (bare.payload_url, bare.pid)}
        if t.nginx is not None:
            targets["nginx"] = (f"{t.nginx.base}/payload.bin", t.nginx.pid)
        cpu: list[float] = []
        for _, name in rotations(list(targets), runs):
            url, pid = targets[name]
            before = cpu_seconds(pid)
            rate, done = wrk_ranges(url, size, 64 * KiB, seconds, 4, work)
            (ranges.ours if name == "bare" else ranges.peer).append(rate)
            if name == "bare":
                cpu.append((cpu_seconds(pid) - before) * 1000 / done)
        ranges.peer_name = "nginx" if t.nginx is not None else ""
        ranges.note = f"server CPU per request {statistics.median(cpu):.2f} ms"
    else:
        ranges.note = "wrk is not installed"
    asyncio.run(small_uploads(lambda n: f"{bare.base}/up/small-{n}.bin", "PUT", max(small_count // 4, 1), 16))
    small.ours = [
        asyncio.run(small_uploads(lambda n: f"{bare.base}/up/small-{n}.bin", "PUT", small_count, 16))
        for _ in range(runs)
    ]
    return rows

"""The store beside its bare counterparts, in one run: each row ours, the bare figure and their ratio.

Each workload runs ``blobstore serve`` next to the least program that does the same work, started here on the
same machine, the order of the two rotated run by run:

- ``ranges``: 64 KiB random ranges (``wrk -t1 -c4``) of ours next to ``bench/bare_app.py`` (one ``pread`` on
  granian's event loop, the server and settings ``blobstore serve`` runs with); and the same ``pread`` as one
  FastAPI route (``bench/bare_fastapi.py``) next to the bare app: what FastAPI's routing costs; and the bare
  app with 100 µs of Python work added per range (``BARE_WORK_US``), next to the bare app: what an app whose
  own path costs that much can reach here, to read beside ours' in-process cost
  (``bench/inprocess_reads.py``). Server CPU per request of each in the note.
- ``small``: 1 KiB durable uploads, 16 in flight, every body new content, ours (``POST /v1/artifacts``) next
  to ``bench/bare_durable.py`` (temp file, ``fsync``, rename to its SHA-256, directory ``fsync``, one SQLite
  row committed with ``synchronous=FULL``: the store's durable work and nothing else), through two clients:
  ``wrk -c16`` with a Lua script that makes each body new, and httpx (itself a bound, near 800/s here).
- ``downloads``: whole downloads with curl, ours next to nginx (``sendfile``).
- ``uploads``: a single-request upload with ``curl -T``, ours (SHA-256 checked, fsynced) next to nginx
  ``PUT``; and ``blobstore upload --parallel 4``, which the same workload runs, next to the same ``PUT``; and
  the payload written to a new file on the store's file system and fsynced, as the store's writer writes
  (1 MiB writes, writeback started every 8 MiB), with no hashing and no network: nginx does not fsync a
  ``PUT``, so this row says how much of the goal the disk alone leaves to any durable upload.
- ``rss``: the peak resident set of ``blobstore serve``'s processes at start (no decoder worker runs until a
  view needs one) and at the end of the run, next to the bare app's.

Every measured transfer is checked outside the timed part: ranges against the payload's bytes, downloads by
SHA-256, uploads by the digest answered (nginx by the size stored), 1 KiB uploads by the count of new files in
each store (and one body read back). Usage::

    .venv/bin/python bench/ceiling.py [--size-mib 256] [--runs 3] [--seconds 5] [--only ranges,small]
    .venv/bin/python bench/ceiling.py --quick    # smoke run: 4 MiB, one run, a second per wrk run

Writes ``bench/results/<date>-ceiling.md`` (``--output``) and prints it.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import hashlib
import json
import os
import random
import sqlite3
import statistics
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

from clients import (
    KiB,
    MiB,
    Payload,
    WrkUploads,
    make_payload,
    own_cpu,
    small_uploads,
    wrk_ranges,
    wrk_uploads,
)
from harness import (
    BENCH_DIR,
    Bare,
    Ours,
    Row,
    Targets,
    bare_app,
    blobstore_serve,
    cpu_seconds,
    find_binary,
    granian_factory,
    nginx,
    peak_rss_mib,
    process_tree,
    render,
    rotations,
)
from workload_reads import bench_downloads
from workload_uploads import bench_uploads, upload_ours_single

WORKLOADS = ("ranges", "small", "downloads", "uploads", "rss")
LOAD_ORDER = ("uploads", "downloads", "ranges", "small")
"""The order the loads run in (the uploads make the artifact the reads read)."""
IN_FLIGHT = 16
RANGE = 64 * KiB
BUSY_US = 100
"""The Python work per range of the bare app's yardstick row: about what ours costs in process."""


def ranged_read(url: str, offset: int, length: int) -> bytes:
    return subprocess.run(
        ["curl", "-sS", "--fail", "-H", f"Range: bytes={offset}-{offset + length - 1}", url],
        check=True,
        capture_output=True,
    ).stdout


def bench_ranges(
    t: Targets, bare: Bare, fastapi: Bare, busy: Bare, runs: int, seconds: int, work: Path
) -> list[Row]:
    """64 KiB random ranges under wrk: ours, the FastAPI route and the bare app with Python work added, each
    next to the bare app."""
    targets = {
        "ours": (t.content_url, t.ours.pid),
        "bare": (bare.payload_url, bare.pid),
        "fastapi": (fastapi.payload_url, fastapi.pid),
        "busy": (busy.payload_url, busy.pid),
    }
    for name, (url, _) in targets.items():
        offset = random.randrange((t.payload.size - RANGE) // 4096 + 1) * 4096
        if ranged_read(url, offset, RANGE) != t.payload.slice(offset, RANGE):
            raise SystemExit(f"{name}: a ranged read returned other bytes")
    rates: dict[str, list[float]] = {name: [] for name in targets}
    cpu: dict[str, list[float]] = {name: [] for name in targets}
    for _, name in rotations(list(targets), runs):
        url, pid = targets[name]
        before = cpu_seconds(pid)
        rate, done = wrk_ranges(url, t.payload.size, RANGE, seconds, 4, work)
        rates[name].append(rate)
        cpu[name].append((cpu_seconds(pid) - before) * 1000 / done)
    ms = {name: statistics.median(values) for name, values in cpu.items()}
    ours = Row(
        "64 KiB random ranges, wrk -t1 -c4", "req/s", rates["ours"], "bare app", rates["bare"], "≥ 0.6"
    )
    ours.note = f"server CPU per request: ours {ms['ours']:.2f} ms, bare app {ms['bare']:.2f} ms"
    route = Row(
        "64 KiB random ranges, the bare app's pread as one FastAPI route",
        "req/s",
        rates["fastapi"],
        "bare app",
        rates["bare"],
        "informative",
    )
    route.note = (
        f"what FastAPI's routing costs; server CPU per request: FastAPI route {ms['fastapi']:.2f} ms, "
        f"bare app {ms['bare']:.2f} ms"
    )
    yardstick = Row(
        f"64 KiB random ranges, the bare app with {BUSY_US} µs of Python per range (no system call)",
        "req/s",
        rates["busy"],
        "bare app",
        rates["bare"],
        "informative",
    )
    yardstick.note = (
        f"what an app whose own path costs {BUSY_US} µs reaches here (bench/inprocess_reads.py gives ours); "
        f"server CPU per request {ms['busy']:.2f} ms"
    )
    return [ours, route, yardstick]


def files_under(directory: Path) -> int:
    return sum(len(names) for _, _, names in os.walk(directory))


def settled(count: Callable[[], int]) -> int:
    """``count()`` once two readings 0.2 s apart agree: uploads a client left in flight have landed."""
    last = count()
    while True:
        time.sleep(0.2)
        now = count()
        if now == last:
            return now
        last = now


@dataclass
class SmallSide:
    """One side of the 1 KiB uploads: where to send them and how many landed."""

    base: str
    pid: int
    path: str
    """The path of upload ``n``: one ``%d``."""
    method: str
    count: Callable[[], int]

    def url(self, number: int) -> str:
        return self.base + self.path % number


def ours_side(ours: Ours) -> SmallSide:
    blobs = ours.data_dir / "blobs" / "blobs"  # one file per distinct content: every body here is new
    path = "/v1/artifacts?name=small-%d.bin"
    return SmallSide(ours.base, ours.pid, path, "POST", lambda: files_under(blobs))


def durable_side(durable: Bare, root: Path) -> SmallSide:
    def count() -> int:
        """The rows committed (the last step of an upload), once each has its file."""
        with sqlite3.connect(root / "index.sqlite") as db:
            rows: int = db.execute("SELECT count(*) FROM blobs").fetchone()[0]
        files = files_under(root / "blobs")
        if files < rows:
            raise SystemExit(f"bare durable app: {rows} rows but only {files} files")
        return rows

    return SmallSide(durable.base, durable.pid, "/up/small-%d.bin", "PUT", count)


def newest_ours_body(ours: Ours) -> bytes:
    with urllib.request.urlopen(f"{ours.base}/v1/artifacts?limit=1") as response:
        artifact_id = json.load(response)["items"][0]["id"]
    with urllib.request.urlopen(f"{ours.base}/v1/artifacts/{artifact_id}/content") as response:
        body: bytes = response.read()
    return body


def check_wrk_bodies(name: str, uploads: WrkUploads, ours: Ours, root: Path) -> None:
    """One body wrk sent, read back from the store it went to."""
    if name == "ours":
        got = newest_ours_body(ours)
        number = int(got[8:16]) if got[:8] == b"%08x" % uploads.seed else -1
        if number < 1 or got != uploads.body(number):
            raise SystemExit("ours: the newest artifact is not a body wrk sent")
    else:
        # wrk calls request() once before its first request, so the numbers sent start at 1 or 2.
        stored = (root / "blobs" / hashlib.sha256(uploads.body(n)).hexdigest() for n in (1, 2))
        first = next((path for path in stored if path.exists()), None)
        if first is None or hashlib.sha256(first.read_bytes()).hexdigest() != first.name:
            raise SystemExit("bare durable app: wrk's first body is not stored")


def bench_small(
    ours: Ours, durable: Bare, root: Path, runs: int, seconds: int, count: int, work: Path
) -> list[Row]:
    """1 KiB durable uploads, 16 in flight, each body new: ours next to the bare durable app, through wrk and
    httpx; the uploads that landed are counted outside the timed part."""
    sides = {"ours": ours_side(ours), "bare": durable_side(durable, root)}
    goal = "≥ 0.6, ≥ 1,000/s absolute"
    wrk_row = Row(f"1 KiB durable uploads, {IN_FLIGHT} in flight, wrk (Lua: a new body each)", "uploads/s")
    httpx_row = Row(f"1 KiB durable uploads, {IN_FLIGHT} in flight, httpx", "uploads/s")
    rows = {"httpx": httpx_row}
    if find_binary("wrk") is not None:
        rows = {"wrk": wrk_row, **rows}
    for row in rows.values():
        row.peer_name, row.goal = "bare durable app", goal
    # Per upload, ms: the server CPU of each client and side, and httpx's own (it runs in this process).
    server_ms: dict[tuple[str, str], list[float]] = {(client, name): [] for client in rows for name in sides}
    client_ms: list[float] = []
    for run, name in rotations(list(sides), runs + 1):  # run 0 warms up
        side = sides[name]
        if "wrk" in rows:
            uploads = WrkUploads(side.method, side.path.replace("%d", f"{random.randrange(1 << 30)}-%d"))
            landed, cpu_before = settled(side.count), cpu_seconds(side.pid)
            rate, done, errors = wrk_uploads(side.base, uploads, seconds if run else 1, IN_FLIGHT, work)
            new = settled(side.count) - landed
            # Requests wrk left in flight when its time ran out (or lost to a socket error) may land as well.
            if not done <= new <= done + IN_FLIGHT + errors:
                raise SystemExit(f"{name}: wrk had {done} uploads answered, {new} landed")
            check_wrk_bodies(name, uploads, ours, root)
            if run:
                (wrk_row.ours if name == "ours" else wrk_row.peer).append(rate)
                server_ms["wrk", name].append((cpu_seconds(side.pid) - cpu_before) * 1000 / new)
        uploads_count = count if run else max(count // 4, 1)
        landed, cpu_before, client_before = settled(side.count), cpu_seconds(side.pid), own_cpu()
        rate = asyncio.run(small_uploads(side.url, side.method, uploads_count, IN_FLIGHT))
        cpu_after, client_after = cpu_seconds(side.pid), own_cpu()
        new = settled(side.count) - landed
        if new != uploads_count:
            raise SystemExit(f"{name}: {uploads_count} uploads answered, {new} landed")
        if run:
            (httpx_row.ours if name == "ours" else httpx_row.peer).append(rate)
            server_ms["httpx", name].append((cpu_after - cpu_before) * 1000 / uploads_count)
            client_ms.append((client_after - client_before) * 1000 / uploads_count)
    for client, row in rows.items():
        ours_ms = statistics.median(server_ms[client, "ours"])
        bare_ms = statistics.median(server_ms[client, "bare"])
        row.note = f"server CPU per upload: ours {ours_ms:.2f} ms, bare {bare_ms:.2f} ms"
    httpx_row.note += (
        f"; httpx's own CPU per upload {statistics.median(client_ms):.2f} ms (it bounds the rate)"
    )
    return list(rows.values())


def bench_rss(ours: Ours, bare: Bare, start: tuple[float, float, int], workloads: list[str]) -> list[Row]:
    """Peak RSS of ``blobstore serve`` (its busiest process) at start and at the end, next to the bare app's;
    ``start`` is (ours, the bare app's, the number of ours' processes) read at start."""
    processes = start[2]
    at_start = Row("peak RSS of `blobstore serve` at start, decoder workers idle", "MiB", [start[0]])
    at_start.peer_name, at_start.peer, at_start.goal = "bare app", [start[1]], "≤ 150 (absolute)"
    at_start.note = f"{processes} processes (granian's and its worker; a decoder worker starts per view job)"
    after = Row("peak RSS of `blobstore serve` after the load", "MiB", [peak_rss_mib(ours.pid)])
    after.peer_name, after.peer, after.goal = "bare app", [peak_rss_mib(bare.pid)], "≤ 150 (absolute)"
    after.note = "VmHWM since start, over " + ", ".join(workloads)
    return [at_start, after]


def ceiling_rows(args: argparse.Namespace, only: set[str], work: Path, extra: list[str]) -> list[Row]:
    rows: list[Row] = []
    with ExitStack() as stack:
        payload: Payload = make_payload(work / "payload.bin", args.size_mib * MiB)
        ours = stack.enter_context(blobstore_serve(work))
        bare = stack.enter_context(bare_app(payload.path))
        start = (peak_rss_mib(ours.pid), peak_rss_mib(bare.pid), len(process_tree(ours.pid)))
        peer = stack.enter_context(nginx(work)) if only & {"downloads", "uploads"} else None
        t = Targets(ours, peer, None, payload)
        if peer is not None:
            os.link(payload.path, peer.root / "payload.bin")  # what nginx serves
        elif only & {"downloads", "uploads"}:
            extra.append("- nginx is not installed: the download and upload rows are empty.")
        wrk = find_binary("wrk") is not None
        if not wrk:
            extra.append(
                "- wrk is not installed: no ranges rows, no wrk uploads row (`apt-get install -y wrk`)."
            )
        if "uploads" in only:
            # Ours next to nginx PUT: a single request (the goal's row), `blobstore upload`'s chunks, and
            # the payload written and fsynced alone, which bounds both.
            single, chunked, written = bench_uploads(t, args.runs)[:3]
            single.workload = "single-request upload (sha256 checked, fsynced), curl -T"
            rows += [single, chunked, written]
        else:
            upload_ours_single(t)  # the artifact the reads read
        if "downloads" in only:
            download = bench_downloads(t, args.runs)[0]  # ours next to nginx
            download.goal = "≥ 0.95"
            rows.append(download)
        if "ranges" in only and wrk:
            fastapi = stack.enter_context(
                granian_factory("bare_fastapi:app", {"BARE_FILE": str(payload.path)})
            )
            busy_env = {"BARE_FILE": str(payload.path), "BARE_WORK_US": str(BUSY_US)}
            busy = stack.enter_context(granian_factory("bare_app:app", busy_env))
            rows += bench_ranges(t, bare, fastapi, busy, args.runs, args.seconds, work)
        if "small" in only:
            root = work / "bare-durable"
            durable = stack.enter_context(granian_factory("bare_durable:app", {"BARE_DIR": str(root)}))
            rows += bench_small(ours, durable, root, args.runs, args.seconds, args.small_count, work)
        if "rss" in only:
            loads = [name for name in LOAD_ORDER if name in only]
            if "uploads" not in only:
                loads.insert(0, "one upload of the payload")
            rows += bench_rss(ours, bare, start, loads)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size-mib", type=int, default=256, help="size of the large payload")
    parser.add_argument("--runs", type=int, default=3, help="timed runs per target and workload")
    parser.add_argument("--seconds", type=int, default=5, help="wrk duration per run")
    parser.add_argument("--small-count", type=int, default=2000, help="1 KiB httpx uploads per run")
    parser.add_argument("--quick", action="store_true", help="smoke run: tiny sizes, a second per wrk run")
    parser.add_argument("--only", default=",".join(WORKLOADS), help=f"a subset of {','.join(WORKLOADS)}")
    parser.add_argument("--output", type=Path, help="default: bench/results/<date>-ceiling.md")
    args = parser.parse_args()
    if args.quick:
        args.size_mib, args.runs, args.seconds, args.small_count = 4, 1, 1, 64
    only = set(args.only.split(","))
    unknown = only.difference(WORKLOADS)
    if unknown:
        parser.error(f"--only: unknown workload {sorted(unknown)[0]!r}; choose from {','.join(WORKLOADS)}")
    today = datetime.datetime.now(datetime.UTC)
    output = args.output or BENCH_DIR / "results" / f"{today:%Y-%m-%d}-ceiling.md"
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    extra = [
        f"- counterparts: bench/bare_app.py, bench/bare_fastapi.py (FastAPI {version('fastapi')}) and "
        "bench/bare_durable.py, each under granian as `blobstore serve` runs (one worker); nginx as in run.py"
    ]
    with tempfile.TemporaryDirectory(prefix="bench-ceiling-") as tmp:
        rows = ceiling_rows(args, only, Path(tmp), extra)
    load_after = " ".join(f"{x:.2f}" for x in os.getloadavg())
    report = render(
        args, rows, extra, (load_before, load_after), title="The store beside its bare counterparts"
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(report)
    print(report)


if __name__ == "__main__":
    main()

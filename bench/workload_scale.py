"""The suite's workloads over a large store: cleanup of many expired artifacts, a deep ``resources/list``
page.

Both stores are filled the way a server fills them: ``ArtifactService.create_artifact`` in process, many puts
in flight on one event loop, each a distinct random body (a real blob file, hashed and fsynced, and its rows,
committed by the repository's group commit). Nothing is written around the service.

``list``: ``blobstore mcp`` (stdio, the minimal client of the ``mcp`` workload) on the large store; the client
walks every page with the cursor, then times the deepest full page next to the first, alternating.

``cleanup``: the in-process entry point ``blobstore cleanup`` runs (``run_cleanup`` over a runtime opened as
the command opens it, every step, no grace), timed on a store of ``count`` expired artifacts and on one of a
tenth as many. Expiry comes from the store's clock moved past the artifacts' TTL, the store's own time travel
(the ``source`` of ``ArtifactService.clock``); the large store is the one ``list`` read, so it is filled once.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import anyio
from harness import Row, rotations
from mcp_client import RawStdioClient

from blobstore.cleanup import run_cleanup
from blobstore.cleanup_report import CleanupReport
from blobstore.clock import utcnow
from blobstore.config import Settings
from blobstore.models import Caller
from blobstore.runtime import open_runtime, open_service

NAMESPACE = "default"
"""What ``blobstore mcp`` lists without a token or ``--namespace``."""
BODY_BYTES = 256
TTL_SECONDS = 3600
IN_FLIGHT = 64
IO_THREADS = 64


@dataclass
class Store:
    data_dir: Path
    count: int
    fill_seconds: float


def fill(data_dir: Path, count: int, seed: int) -> Store:
    """``count`` artifacts of distinct random bytes, each expiring ``TTL_SECONDS`` after its creation."""

    async def run() -> float:
        caller = Caller(namespace=NAMESPACE, actor="bench")
        rng = random.Random(seed)
        numbers = iter(range(count))
        settings = Settings(data_dir=data_dir, io_threads=IO_THREADS)
        async with open_service(settings) as service:

            async def worker() -> None:
                for number in numbers:
                    body = rng.randbytes(BODY_BYTES)

                    async def one(data: bytes = body) -> AsyncIterator[bytes]:
                        yield data

                    name = f"a-{number}.bin"
                    await service.create_artifact(
                        caller, one(), name=name, ttl_seconds=TTL_SECONDS, expected_size=BODY_BYTES
                    )

            started = time.perf_counter()
            async with anyio.create_task_group() as group:
                for _ in range(IN_FLIGHT):
                    group.start_soon(worker)
            return time.perf_counter() - started

    return Store(data_dir, count, anyio.run(run))


def blob_files(data_dir: Path) -> int:
    """Published blob files of the local store: ``<data dir>/blobs/blobs/<fan-out>/<digest>.<generation>``."""
    return sum(1 for path in (data_dir / "blobs" / "blobs").rglob("*") if path.is_file())


def timed_cleanup(store: Store) -> float:
    """Seconds of one full cleanup run once every artifact of ``store`` expired; checks what it removed."""

    def later() -> datetime:
        return utcnow() + timedelta(seconds=TTL_SECONDS + 60)

    async def run() -> tuple[float, CleanupReport]:
        async with open_runtime(Settings(data_dir=store.data_dir), server=False) as runtime:
            runtime.service.clock.source = later
            started = time.perf_counter()
            report = await run_cleanup(runtime.cleanup, grace_seconds=0)
            return time.perf_counter() - started, report

    before = blob_files(store.data_dir)
    seconds, report = anyio.run(run)
    expired, freed = report.step("expire").items, report.step("blobs").items
    if expired != store.count or freed != store.count or before < store.count or blob_files(store.data_dir):
        raise SystemExit(
            f"cleanup of {store.count}: expired {expired}, freed {freed} blobs, "
            f"{blob_files(store.data_dir)} of {before} blob files left"
        )
    return seconds


@dataclass
class ListTimes:
    first: list[float]
    deep: list[float]
    walk_seconds: float
    pages: int


def page(client: RawStdioClient, cursor: str | None) -> tuple[list[str], str | None]:
    result = client.request("resources/list", {} if cursor is None else {"cursor": cursor})
    return [resource["uri"] for resource in result["resources"]], result.get("nextCursor")


def time_list(
    store: Store, runs: int, ops: int, rotations: Callable[[list[str], int], Iterator[tuple[int, str]]]
) -> ListTimes:
    """Walk every page of ``store`` over ``blobstore mcp``, then time the first and the deepest full page."""
    argv = [str(Path(sys.executable).with_name("blobstore")), "mcp", "--data-dir", str(store.data_dir)]
    client = RawStdioClient(argv)
    try:
        started = time.perf_counter()
        cursors: list[str | None] = [None]
        pages: list[list[str]] = []
        while True:
            uris, after = page(client, cursors[-1])
            pages.append(uris)
            if after is None:
                break
            cursors.append(after)
        walk_seconds = time.perf_counter() - started
        seen = [uri for uris in pages for uri in uris]
        if len(seen) != store.count or len(set(seen)) != store.count:
            raise SystemExit(
                f"resources/list: {len(seen)} resources ({len(set(seen))} distinct), {store.count} stored"
            )
        deepest = max(i for i, uris in enumerate(pages) if len(uris) == len(pages[0]))
        targets = {"first": (cursors[0], pages[0]), "deep": (cursors[deepest], pages[deepest])}
        samples: dict[str, list[float]] = {"first": [], "deep": []}
        for run, name in rotations(list(targets), runs + 1):
            cursor, expected = targets[name]
            seconds = []
            for _ in range(ops):
                began = time.perf_counter()
                uris, _ = page(client, cursor)
                seconds.append(time.perf_counter() - began)
                if uris != expected:
                    raise SystemExit(f"resources/list, {name} page: other resources than on the walk")
            if run:  # run 0 warms up
                samples[name].append(statistics.median(seconds) * 1000)
        return ListTimes(samples["first"], samples["deep"], walk_seconds, len(pages))
    finally:
        client.close()


def rows(args: argparse.Namespace, only: set[str], work: Path) -> list[Row]:
    """Cleanup of ``--scale-count`` expired artifacts against a tenth as many, and a deep ``resources/list``
    page of a store that large against its first page. One store of ``--scale-count`` serves both: listed
    first, then expired and cleaned up."""
    count = args.scale_count
    rows: list[Row] = []
    big = fill(work / "scale-big", count, seed=1)
    filled = f"filled in {big.fill_seconds:.0f} s ({count / big.fill_seconds:,.0f} puts/s)"
    if "list" in only:
        listed = time_list(big, args.runs, args.list_ops, rotations)
        row = Row(
            f"deep `resources/list` page (the last full one of {count:,}, by cursor) vs the first, "
            "`blobstore mcp` stdio, median",
            "ms",
            listed.deep,
            "first page",
            listed.first,
            goal="≤ 1.5",
            higher_is_better=False,
        )
        row.note = f"{listed.pages:,} pages walked in {listed.walk_seconds:.1f} s; store {filled}"
        rows.append(row)
    if "cleanup" in only:
        small = fill(work / "scale-small", count // 10, seed=2)
        small_seconds = timed_cleanup(small)
        big_seconds = timed_cleanup(big)
        row = Row(
            f"cleanup of {count:,} expired artifacts (rows and blob files) vs {count // 10:,}, in process",
            "s",
            [big_seconds],
            f"{count // 10:,} expired",
            [small_seconds],
            goal="≤ 12",
            higher_is_better=False,
        )
        row.note = "`run_cleanup`, every step, grace 0; one run each (a run consumes its store)"
        rows.append(row)
    return rows

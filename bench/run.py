"""One benchmark suite: each workload of ``blobstore serve`` and ``blobstore mcp`` next to its peer, one run.

Peers: nginx (``sendfile on``; WebDAV ``PUT``), Debian's docker-registry (filesystem driver) and
``@modelcontextprotocol/server-filesystem`` (``npm ci --prefix bench``). Each workload alternates the order of
ours and the peers run by run, so load from other jobs on the machine hits all alike; every measured transfer
is checked for the right bytes outside the timed part. Usage::

    apt-get install -y nginx wrk docker-registry curl && npm ci --prefix bench
    .venv/bin/python bench/run.py [--size-mib 1024] [--runs 5] [--seconds 10] [--quick]

Writes ``bench/results/<date>.md`` (``--output``) and prints it. A missing peer is reported as such. This
file only composes: the servers and the report are in ``harness.py``, the clients in ``clients.py``, each
workload family in its ``workload_*.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import tempfile
from contextlib import ExitStack
from pathlib import Path

import workload_scale
from clients import MiB, make_payload
from harness import (
    BENCH_DIR,
    Row,
    Targets,
    bare_app,
    blobstore_serve,
    docker_registry,
    find_binary,
    nginx,
    nginx_front,
    peak_rss_mib,
    process_tree,
    render,
    reset_peak_rss,
)
from workload_ceilings import bench_ceilings
from workload_mcp import bench_mcp
from workload_reads import bench_downloads, bench_ranges
from workload_uploads import bench_small_uploads, bench_uploads, upload_ours_single

HTTP_WORKLOADS = ("uploads", "downloads", "ranges", "small", "mcp", "ceilings")
SCALE_WORKLOADS = ("cleanup", "list")
WORKLOADS = HTTP_WORKLOADS + SCALE_WORKLOADS


def http_rows(args: argparse.Namespace, only: set[str], work: Path, extra: list[str]) -> list[Row]:
    """The workloads against ``blobstore serve`` and its peers, and the server's peak RSS over them."""
    rows: list[Row] = []
    with ExitStack() as stack:
        payload = make_payload(work / "payload.bin", args.size_mib * MiB)
        ours = stack.enter_context(blobstore_serve(work))
        targets = Targets(
            ours, stack.enter_context(nginx(work)), stack.enter_context(docker_registry(work)), payload
        )
        for name, found in (("nginx", targets.nginx), ("docker-registry", targets.registry)):
            if found is None:
                extra.append(f"- {name} is not installed: its rows are empty (`apt-get install -y {name}`).")
        if targets.nginx is not None:
            os.link(payload.path, targets.nginx.root / "payload.bin")  # what nginx serves
        if "downloads" in only:
            targets.front = stack.enter_context(nginx_front(work, ours))
        peaks: dict[str, float] = {}

        def peak_of(workload: str) -> None:
            """The serve processes' peak RSS since the last workload, then the peak is reset."""
            peaks[workload] = peak_rss_mib(ours.pid)
            for pid in process_tree(ours.pid):
                with contextlib.suppress(OSError):
                    reset_peak_rss(pid)

        peak_of("start")
        if "uploads" in only:
            rows += bench_uploads(targets, args.runs)
        else:
            upload_ours_single(targets)  # the artifact the reads read
        peak_of("uploads")
        if "downloads" in only:
            rows += bench_downloads(targets, args.runs)
            peak_of("downloads")
        if "ranges" in only and find_binary("wrk") is not None:
            rows += bench_ranges(targets, args.runs, args.seconds, work)
            peak_of("ranges")
        elif "ranges" in only:
            extra.append("- wrk is not installed: no ranges row (`apt-get install -y wrk`).")
        if "small" in only:
            rows.extend(bench_small_uploads(targets, args.runs, args.small_count))
            peak_of("1 KiB uploads")
        if "mcp" in only:
            mcp_rows, mcp_peak = bench_mcp(targets, args.runs, args.mcp_ops, args.windows, work)
            rows += mcp_rows
            rows.append(Row("peak RSS of `blobstore mcp` over its reads", "MiB", [mcp_peak], goal="≤ 150"))
            peak_of("MCP (HTTP ranges)")
        if "ceilings" in only:
            with bare_app(payload.path) as bare:
                rows += bench_ceilings(targets, bare, args.runs, args.seconds, args.small_count, work)
        serve = Row(
            "peak RSS of `blobstore serve` over the whole run", "MiB", [max(peaks.values())], goal="≤ 150"
        )
        serve.note = "by workload: " + ", ".join(f"{name} {peak:.0f}" for name, peak in peaks.items())
        rows.append(serve)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size-mib", type=int, default=1024, help="size of the large payload")
    parser.add_argument("--runs", type=int, default=5, help="timed runs per target and workload")
    parser.add_argument("--seconds", type=int, default=10, help="wrk duration per ranges run")
    parser.add_argument("--small-count", type=int, default=2000, help="1 KiB uploads per run")
    parser.add_argument("--mcp-ops", type=int, default=200, help="4 KiB MCP reads per run")
    parser.add_argument("--windows", type=int, default=32, help="1 MiB windows per run")
    parser.add_argument(
        "--scale-count", type=int, default=100_000, help="artifacts of the large store (cleanup, list)"
    )
    parser.add_argument("--list-ops", type=int, default=50, help="resources/list pages per run and page")
    parser.add_argument("--quick", action="store_true", help="smoke run: tiny sizes, a few seconds each")
    parser.add_argument("--only", default=",".join(WORKLOADS), help=f"a subset of {','.join(WORKLOADS)}")
    parser.add_argument("--output", type=Path, help="default: bench/results/<date>.md")
    args = parser.parse_args()
    if args.quick:
        args.size_mib, args.runs, args.seconds = 4, 1, 1
        args.small_count, args.mcp_ops, args.windows = 64, 20, 2
        args.scale_count, args.list_ops = 300, 5
    only = set(args.only.split(","))
    unknown = only.difference(WORKLOADS)
    if unknown:
        parser.error(f"--only: unknown workload {sorted(unknown)[0]!r}; choose from {','.join(WORKLOADS)}")
    output = args.output or BENCH_DIR / "results" / f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d}.md"
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    extra: list[str] = []
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench-suite-") as tmp:
        work = Path(tmp)
        if only.intersection(HTTP_WORKLOADS):
            rows += http_rows(args, only, work, extra)
        if only.intersection(SCALE_WORKLOADS):
            rows += workload_scale.rows(args, only, work)
    load_after = " ".join(f"{x:.2f}" for x in os.getloadavg())
    report = render(args, rows, extra, (load_before, load_after))
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(report)
    print(report)


if __name__ == "__main__":
    main()

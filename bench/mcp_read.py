"""Reading artifacts over MCP: ``blobstore mcp`` side by side with the reference filesystem server.

One run, one machine, the same random bytes on both sides, the same client for both:

* whole reads of 256 KiB, 4 MiB and 16 MiB: ours follows ``_meta["dev.blobstore/window"].next`` through
  1 MiB ``resources/read`` windows; the peer (``@modelcontextprotocol/server-filesystem``) answers one
  ``read_media_file`` call with the whole file as base64;
* latency of 4 KiB reads (ours: a whole 4 KiB artifact, and a 4 KiB window in the middle of the 16 MiB one;
  the peer: a 4 KiB file, as it has no byte ranges for binary files);
* peak RSS (``VmHWM``) of each server process across one 16 MiB read, each in a fresh process.

The reads run twice: with the official Python SDK ``mcp.Client`` (what a Python host uses), and with a
minimal JSON-RPC stdio client (linear line reading, ``json.loads``), which shows the servers without the SDK
client's own per-message costs. Targets are interleaved run by run (the order rotates), so load from other
jobs on the machine hits all of them alike. Every read is checked against the SHA-256 of the bytes written,
outside the timed interval. ``--http`` adds ours over streamable HTTP (``blobstore serve``, ``/mcp``).
Usage::

    (cd bench && npm ci)               # the peer, pinned in bench/package.json
    .venv/bin/python bench/mcp_read.py [--runs 5] [--latency-ops 200] [--rss-runs 3] [--http]

Writes the markdown report to stdout and to ``bench/results/mcp_read.md`` (``--output``).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import hashlib
import inspect
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import TextIO

import anyio
from clients import KiB, MiB
from harness import (
    BENCH_DIR,
    PEER_DIR,
    children_of,
    command_output,
    cpu_model,
    free_port,
    package_version,
    reset_peak_rss,
)
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_client import LEGACY_VERSION, RawStdioClient, Reader, sdk_media_reader, sdk_window_reader

from blobstore.config import Settings
from blobstore.models import Caller
from blobstore.runtime import open_service
from mcp_resources.uris import window_uri

SIZES = (256 * KiB, 4 * MiB, 16 * MiB)
SMALL = 4 * KiB
WINDOW = 1 * MiB
NAMESPACE = "default"
"""The namespace both transports act in without a token: stdio's default and HTTP's local (loopback) mode."""
PEER_PACKAGE = "@modelcontextprotocol/server-filesystem"
PEER_SDK_DIR = BENCH_DIR / "node_modules" / "@modelcontextprotocol" / "sdk"

OURS_STDIO = "blobstore mcp (stdio)"
OURS_HTTP = "blobstore serve /mcp (HTTP)"
PEER = "server-filesystem (stdio)"


def human(size: int) -> str:
    return f"{size // MiB} MiB" if size >= MiB else f"{size // KiB} KiB"


# -- processes ---------------------------------------------------------------------------------------------


def only_child(pids: set[int]) -> int:
    if len(pids) != 1:
        raise RuntimeError(f"expected one server process, found {sorted(pids)}")
    return next(iter(pids))


def proc_status_kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


# -- the payloads --------------------------------------------------------------------------------------------


@dataclass
class Fixture:
    root: Path
    data_dir: Path
    files: dict[int, Path]
    artifact_ids: dict[int, str]
    digests: dict[int, str]
    window_digest: str
    """SHA-256 of the 4 KiB in the middle of the largest payload (the small range read)."""


async def make_fixture(root: Path) -> Fixture:
    files_dir = root / "files"
    files_dir.mkdir()
    data_dir = root / "data"
    files: dict[int, Path] = {}
    ids: dict[int, str] = {}
    digests: dict[int, str] = {}
    window_digest = ""
    settings = Settings(data_dir=data_dir, mcp_namespace=NAMESPACE)
    async with open_service(settings) as service:
        for size in (SMALL, *SIZES):
            payload = os.urandom(size)
            path = files_dir / f"payload-{size}.bin"
            path.write_bytes(payload)

            async def chunks(data: bytes = payload) -> AsyncIterator[bytes]:
                for start in range(0, len(data), MiB):
                    yield data[start : start + MiB]

            artifact = await service.create_artifact(
                Caller(namespace=NAMESPACE, actor="bench"),
                chunks(),
                name=path.name,
                mime_type="application/octet-stream",
                expected_size=size,
                pinned=True,
            )
            files[size] = path
            ids[size] = artifact.id
            digests[size] = hashlib.sha256(payload).hexdigest()
            if size == SIZES[-1]:
                middle = size // 2
                window_digest = hashlib.sha256(payload[middle : middle + SMALL]).hexdigest()
    return Fixture(files_dir, data_dir, files, ids, digests, window_digest)


def ours_argv(fx: Fixture) -> list[str]:
    command = str(Path(sys.executable).with_name("blobstore"))
    return [command, "mcp", "--data-dir", str(fx.data_dir), "--namespace", NAMESPACE]


def peer_argv(fx: Fixture) -> list[str]:
    node = shutil.which("node")
    if node is None or not (PEER_DIR / "dist" / "index.js").exists():
        raise SystemExit(f"the peer is missing: install Node.js and run `npm ci` in {BENCH_DIR}")
    return [node, str(PEER_DIR / "dist" / "index.js"), str(fx.root)]


# -- what one client reads from one server -------------------------------------------------------------


@dataclass
class Suite:
    whole: dict[int, Reader]
    small: dict[str, tuple[Reader, str]]
    """label -> (reader, SHA-256 of the expected 4 KiB)."""


def ours_suite(fx: Fixture, reader: Callable[[str, bool], Reader]) -> Suite:
    big = fx.artifact_ids[SIZES[-1]]
    return Suite(
        whole={size: reader(window_uri(fx.artifact_ids[size], 0, WINDOW), True) for size in SIZES},
        small={
            "4 KiB artifact": (
                reader(f"blobstore://artifacts/{fx.artifact_ids[SMALL]}", False),
                fx.digests[SMALL],
            ),
            "4 KiB window of 16 MiB": (
                reader(window_uri(big, SIZES[-1] // 2, SMALL), False),
                fx.window_digest,
            ),
        },
    )


def peer_suite(fx: Fixture, reader: Callable[[Path], Reader]) -> Suite:
    return Suite(
        whole={size: reader(fx.files[size]) for size in SIZES},
        small={"4 KiB file": (reader(fx.files[SMALL]), fx.digests[SMALL])},
    )


def sdk_suite(name: str, client: Client, fx: Fixture) -> Suite:
    if name == PEER:
        return peer_suite(fx, lambda path: sdk_media_reader(client, path))
    return ours_suite(fx, lambda uri, follow: sdk_window_reader(client, uri, follow=follow))


def sdk_client(name: str, fx: Fixture, quiet: TextIO, http_url: str | None = None) -> Client:
    if name == OURS_HTTP:
        assert http_url is not None
        return Client(http_url, cache=None)
    argv = peer_argv(fx) if name == PEER else ours_argv(fx)
    params = StdioServerParameters(command=argv[0], args=argv[1:])
    # cache=None: ours marks windows cacheable for a year, and a cache hit would measure nothing.
    return Client(stdio_client(params, errlog=quiet), cache=None)


@contextlib.contextmanager
def raw_suites(fx: Fixture) -> Iterator[dict[str, Suite]]:
    ours_client = RawStdioClient(ours_argv(fx))
    try:
        peer_client = RawStdioClient(peer_argv(fx))
        try:
            yield {
                OURS_STDIO: ours_suite(fx, ours_client.window_reader),
                PEER: peer_suite(fx, peer_client.media_reader),
            }
        finally:
            peer_client.close()
    finally:
        ours_client.close()


# -- measuring -----------------------------------------------------------------------------------------


@dataclass
class Outcome:
    seconds: list[float] = field(default_factory=list)
    error: str | None = None


def check(data: bytes, digest: str, what: str) -> None:
    if hashlib.sha256(data).hexdigest() != digest:
        raise AssertionError(f"{what}: wrong bytes ({len(data)} bytes read)")


async def timed(read: Reader) -> tuple[float, bytes]:
    started = time.perf_counter()
    result = read()
    data = await result if inspect.isawaitable(result) else result
    return time.perf_counter() - started, data


def failure(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:160]


def rotated(names: list[str], turn: int) -> list[str]:
    shift = turn % len(names)
    return names[shift:] + names[:shift]


async def measure_throughput(
    suites: dict[str, Suite], fx: Fixture, runs: int
) -> dict[str, dict[int, Outcome]]:
    out = {name: {size: Outcome() for size in SIZES} for name in suites}
    for size in SIZES:
        for run in range(runs + 1):  # run 0 warms up and is not kept
            for name in rotated(list(suites), run):
                outcome = out[name][size]
                if outcome.error is not None:
                    continue
                try:
                    seconds, data = await timed(suites[name].whole[size])
                except Exception as exc:
                    # A server's limit is a result to report, not a reason to stop the comparison.
                    outcome.error = failure(exc)
                    continue
                check(data, fx.digests[size], f"{name} {human(size)}")
                if run:
                    outcome.seconds.append(seconds)
    return out


async def measure_latency(suites: dict[str, Suite], rounds: int, ops: int) -> dict[str, Outcome]:
    readers = {
        f"{name}, {label}": pair for name, suite in suites.items() for label, pair in suite.small.items()
    }
    out = {key: Outcome() for key in readers}
    for round_ in range(rounds + 1):  # round 0 warms up and is not kept
        for key in rotated(list(readers), round_):
            read, digest = readers[key]
            for _ in range(ops if round_ else 20):
                seconds, data = await timed(read)
                check(data, digest, key)
                if round_:
                    out[key].seconds.append(seconds)
    return out


@dataclass
class Rss:
    before_kib: list[int] = field(default_factory=list)
    peak_kib: list[int] = field(default_factory=list)
    error: str | None = None


async def measure_rss(
    name: str, fx: Fixture, runs: int, quiet: TextIO, http: tuple[str, int] | None = None
) -> Rss:
    """Peak RSS across one read of the largest payload; stdio servers start afresh for every run."""
    rss = Rss()
    size = SIZES[-1]
    for _ in range(runs):
        before = children_of(os.getpid())
        async with sdk_client(name, fx, quiet, http[0] if http else None) as client:
            # granian runs the HTTP app in a worker process under the one started here.
            pid = only_child(children_of(http[1]) if http else children_of(os.getpid()) - before)
            suite = sdk_suite(name, client, fx)
            await timed(next(iter(suite.small.values()))[0])  # load a read's code paths before the baseline
            rss.before_kib.append(proc_status_kib(pid, "VmRSS"))
            reset_peak_rss(pid)
            try:
                _, data = await timed(suite.whole[size])
            except Exception as exc:
                rss.error = failure(exc)
                return rss
            rss.peak_kib.append(proc_status_kib(pid, "VmHWM"))
            check(data, fx.digests[size], f"{name} rss run")
    return rss


# -- the HTTP server -------------------------------------------------------------------------------------


@contextlib.contextmanager
def http_server(fx: Fixture) -> Iterator[tuple[str, int]]:
    port = free_port()
    env = dict(os.environ, BLOBSTORE_LOG_LEVEL="warning")
    argv = [ours_argv(fx)[0], "serve", "--data-dir", str(fx.data_dir), "--port", str(port)]
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise SystemExit(f"blobstore serve exited with {process.returncode}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("blobstore serve did not become ready") from None
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/mcp", process.pid
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# -- report ------------------------------------------------------------------------------------------------


def p95(values: Sequence[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[-1]


def ratio(ours_value: float | None, peer_value: float | None) -> str:
    if ours_value is None or peer_value is None or peer_value == 0:
        return "n/a"
    return f"{ours_value / peer_value:.2f}"


def mib_s(outcome: Outcome, size: int) -> float | None:
    if outcome.error is not None or not outcome.seconds:
        return None
    return size / MiB / statistics.median(outcome.seconds)


def short(name: str) -> str:
    return "HTTP" if name == OURS_HTTP else "stdio"


def throughput_table(results: dict[str, dict[int, Outcome]]) -> list[str]:
    ours = [name for name in results if name != PEER]
    lines = [
        "| size | "
        + " | ".join(f"{name}, MiB/s" for name in results)
        + " | "
        + " | ".join(f"ours {short(name)} / peer" for name in ours)
        + " |",
        "| --- |" + " ---: |" * (len(results) + len(ours)),
    ]
    for size in SIZES:
        cells = [human(size)]
        for outcome in (results[name][size] for name in results):
            value = mib_s(outcome, size)
            cells.append(f"failed: {outcome.error}" if value is None else f"{value:.1f}")
        peer_value = mib_s(results[PEER][size], size)
        cells += [ratio(mib_s(results[name][size], size), peer_value) for name in ours]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def latency_table(results: dict[str, Outcome]) -> list[str]:
    lines = [
        "| target, read | median ms | p95 ms | ops/s | median vs peer | ops/s vs peer |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    peer_key = next(key for key in results if key.startswith(PEER))
    peer_samples = results[peer_key].seconds
    peer_ops = len(peer_samples) / sum(peer_samples)
    for key, outcome in results.items():
        samples = outcome.seconds
        ops = len(samples) / sum(samples)
        lines.append(
            f"| {key} | {statistics.median(samples) * 1000:.2f} | {p95(samples) * 1000:.2f} | {ops:.0f} | "
            f"{ratio(statistics.median(samples), statistics.median(peer_samples))} | {ratio(ops, peer_ops)} |"
        )
    return lines


def rss_table(results: dict[str, Rss]) -> list[str]:
    lines = [
        "| server | RSS before, MiB | peak RSS (VmHWM), MiB | growth, MiB | peak vs peer | growth vs peer |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]

    def growth(rss: Rss) -> float:
        return statistics.median(p - b for p, b in zip(rss.peak_kib, rss.before_kib, strict=True))

    peer = results[PEER]
    peer_ok = peer.error is None and bool(peer.peak_kib)
    for name, rss in results.items():
        if rss.error is not None or not rss.peak_kib:
            lines.append(f"| {name} | | failed: {rss.error} | | | |")
            continue
        peak = statistics.median(rss.peak_kib)
        lines.append(
            f"| {name} | {statistics.median(rss.before_kib) / 1024:.1f} | {peak / 1024:.1f} | "
            f"{growth(rss) / 1024:.1f} | "
            f"{ratio(peak, statistics.median(peer.peak_kib) if peer_ok else None)} | "
            f"{ratio(growth(rss), growth(peer) if peer_ok else None)} |"
        )
    return lines


@dataclass
class Results:
    started: datetime.datetime
    args: argparse.Namespace
    load: str
    protocols: dict[str, str]
    sdk_throughput: dict[str, dict[int, Outcome]]
    sdk_latency: dict[str, Outcome]
    raw_throughput: dict[str, dict[int, Outcome]]
    raw_latency: dict[str, Outcome]
    rss: dict[str, Rss]

    def render(self) -> str:
        a = self.args
        flags = f"--runs {a.runs} --latency-ops {a.latency_ops} --rss-runs {a.rss_runs}" + (
            " --http" if a.http else ""
        )
        calls = ", ".join(f"{human(s)}: {-(-s // WINDOW)}" for s in SIZES)
        return "\n".join(
            [
                "# MCP reads: `blobstore mcp` next to the reference filesystem server",
                "",
                f"Run {self.started:%Y-%m-%d %H:%M} UTC: `.venv/bin/python bench/mcp_read.py {flags}`.",
                "",
                f"- machine: nproc {command_output('nproc')}, {cpu_model()}, Linux {platform.release()}, "
                f"load average before the run {self.load}",
                f"- ours: mcp-blobstore {version('mcp-blobstore')} (local disk, SQLite), Python "
                f"{platform.python_version()}, mcp {version('mcp')}",
                f"- peer: {PEER_PACKAGE} {package_version(PEER_DIR)} (TypeScript SDK "
                f"{package_version(PEER_SDK_DIR)}), Node.js {command_output('node', '--version')}; "
                "tool `read_media_file` (a `.bin` file comes back as an embedded resource, base64 `blob`)",
                "- clients: the Python SDK `mcp.Client` (response cache off; protocol "
                + ", ".join(f"{name} {proto}" for name, proto in self.protocols.items())
                + f"), and a minimal JSON-RPC stdio client ({LEGACY_VERSION} handshake for both servers)",
                f"- ours reads whole artifacts in {human(WINDOW)} `resources/read` windows, following `next` "
                f"(calls per read: {calls}); the peer answers one tool call per file",
                "",
                "Ratios are ours / peer: above 1 is better for ours in MiB/s and ops/s, below 1 is better "
                "for ours in latency and RSS. Throughput is client wall time per whole read, base64 decoding "
                f"included, median of {a.runs} runs after one warm-up. Latency: {a.runs} rounds of "
                f"{a.latency_ops} sequential reads per target after 20 warm-up reads.",
                "",
                "## Whole reads, Python SDK client",
                "",
                *throughput_table(self.sdk_throughput),
                "",
                "## Whole reads, minimal stdio client",
                "",
                *throughput_table(self.raw_throughput),
                "",
                "## 4 KiB reads, Python SDK client",
                "",
                *latency_table(self.sdk_latency),
                "",
                "## 4 KiB reads, minimal stdio client",
                "",
                *latency_table(self.raw_latency),
                "",
                f"## Server memory across one {human(SIZES[-1])} read (median of {a.rss_runs})",
                "",
                "Resident set of the server process (for HTTP: the granian worker, a long-lived process) "
                "right before the read and its peak (`VmHWM`, reset just before the read) during it.",
                "",
                *rss_table(self.rss),
                "",
            ]
        )


# -- main --------------------------------------------------------------------------------------------------


async def run(args: argparse.Namespace, load: str) -> str:
    started = datetime.datetime.now(datetime.UTC)
    with (
        tempfile.TemporaryDirectory(prefix="mcp-read-bench-") as tmp,
        open(os.devnull, "w") as quiet,  # noqa: ASYNC230 - the servers' start-up banners on stderr
        contextlib.ExitStack() as processes,
    ):
        fx = await make_fixture(Path(tmp))
        names = [OURS_STDIO, PEER]
        http: tuple[str, int] | None = None
        if args.http:
            http = processes.enter_context(http_server(fx))
            names.insert(1, OURS_HTTP)
        async with contextlib.AsyncExitStack() as stack:
            suites: dict[str, Suite] = {}
            protocols: dict[str, str] = {}
            for name in names:
                client = await stack.enter_async_context(
                    sdk_client(name, fx, quiet, http[0] if http else None)
                )
                protocols[name] = client.protocol_version
                suites[name] = sdk_suite(name, client, fx)
            sdk_throughput = await measure_throughput(suites, fx, args.runs)
            sdk_latency = await measure_latency(suites, args.runs, args.latency_ops)
        with raw_suites(fx) as raw:
            raw_throughput = await measure_throughput(raw, fx, args.runs)
            raw_latency = await measure_latency(raw, args.runs, args.latency_ops)
        rss = {
            name: await measure_rss(name, fx, args.rss_runs, quiet, http if name == OURS_HTTP else None)
            for name in names
        }
    return Results(
        started, args, load, protocols, sdk_throughput, sdk_latency, raw_throughput, raw_latency, rss
    ).render()


def main() -> None:
    parser = argparse.ArgumentParser(description="MCP reads: blobstore mcp next to server-filesystem.")
    parser.add_argument("--runs", type=int, default=5, help="timed whole reads per size and target")
    parser.add_argument("--latency-ops", type=int, default=200, help="4 KiB reads per round and target")
    parser.add_argument("--rss-runs", type=int, default=3, help="16 MiB reads measured for peak RSS")
    parser.add_argument("--http", action="store_true", help="also measure ours over streamable HTTP")
    parser.add_argument("--output", type=Path, default=BENCH_DIR / "results" / "mcp_read.md")
    args = parser.parse_args()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    report = anyio.run(run, args, load)
    print(report)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(report)


if __name__ == "__main__":
    main()

"""One benchmark suite: each workload of ``blobstore serve`` and ``blobstore mcp`` next to its peer, one run.

Peers: nginx (``sendfile on``; WebDAV ``PUT``), Debian's docker-registry (filesystem driver) and
``@modelcontextprotocol/server-filesystem`` (``npm ci --prefix bench``). Each workload alternates the order of
ours and the peers run by run, so load from other jobs on the machine hits all alike; every measured transfer
is checked for the right bytes outside the timed part. Usage::

    apt-get install -y nginx wrk docker-registry curl && npm ci --prefix bench
    .venv/bin/python bench/run.py [--size-mib 1024] [--runs 5] [--seconds 10] [--quick]

Writes ``bench/results/<date>.md`` (``--output``) and prints it. A missing peer is reported as such.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import datetime
import hashlib
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path

import httpx
import scale
from http_download import make_payload as write_random_file
from mcp_read import RawStdioClient, cpu_model, package_version, reset_peak_rss
from peers import (
    Bare,
    Nginx,
    Ours,
    Registry,
    bare_app,
    blobstore_serve,
    cpu_seconds,
    cpu_times,
    docker_registry,
    find_binary,
    nginx,
    nginx_front,
    peak_rss_mib,
    process_tree,
)

from mcp_resources.uris import window_uri

KiB = 1024
MiB = 1024 * KiB
HTTP_WORKLOADS = ("uploads", "downloads", "ranges", "small", "mcp", "ceilings")
SCALE_WORKLOADS = ("cleanup", "list")
WORKLOADS = HTTP_WORKLOADS + SCALE_WORKLOADS
BENCH_DIR = Path(__file__).resolve().parent
PEER_DIR = BENCH_DIR / "node_modules" / "@modelcontextprotocol" / "server-filesystem"


# -- results -----------------------------------------------------------------------------------------------


@dataclass
class Row:
    """One comparison: the median of ours next to the median of one peer, and the goal for their ratio."""

    workload: str
    unit: str
    ours: list[float] = field(default_factory=list)
    peer_name: str = ""
    peer: list[float] = field(default_factory=list)
    goal: str = ""
    higher_is_better: bool = True
    note: str = ""

    def ratio(self) -> float | None:
        if not self.ours or not self.peer or statistics.median(self.peer) == 0:
            return None
        return statistics.median(self.ours) / statistics.median(self.peer)

    def cells(self) -> list[str]:
        def med(values: list[float]) -> str:
            return (
                f"{statistics.median(values):,.{2 if statistics.median(values) < 10 else 0}f}"
                if values
                else "-"
            )

        found = self.ratio()
        return [
            self.workload,
            self.unit,
            med(self.ours),
            f"{self.peer_name} {med(self.peer)}" if self.peer_name else "-",
            "-" if found is None else f"{found:.2f}",
            self.goal,
            self.note,
        ]


def synchronous(reader: Callable[[], Awaitable[bytes] | bytes]) -> Callable[[], bytes]:
    """The raw stdio client's readers answer in the calling thread: what they return is the bytes."""

    def read() -> bytes:
        data = reader()
        if not isinstance(data, bytes):
            raise TypeError("a raw stdio reader returned an awaitable")
        return data

    return read


def rotations(names: list[str], runs: int) -> Iterator[tuple[int, str]]:
    """``(run, name)`` with the order rotated every run: each target goes first as often as the others."""
    for run in range(runs):
        shift = run % len(names)
        for name in names[shift:] + names[:shift]:
            yield run, name


# -- the payload ------------------------------------------------------------------------------------------


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


# -- curl, wrk -------------------------------------------------------------------------------------------


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


# -- workloads -------------------------------------------------------------------------------------------


@dataclass
class Targets:
    ours: Ours
    nginx: Nginx | None
    registry: Registry | None
    payload: Payload
    artifact_id: str = ""
    registry_ready: bool = False
    front: str | None = None
    """``deploy/nginx-single.conf`` in front of ours: whole downloads sent by nginx (X-Accel-Redirect)."""

    @property
    def content_url(self) -> str:
        return f"{self.ours.base}/v1/artifacts/{self.artifact_id}/content"


def upload_ours_single(t: Targets) -> float:
    body, seconds = curl(
        "-X", "POST", "-T", str(t.payload.path),
        f"{t.ours.base}/v1/artifacts?name=payload.bin&sha256={t.payload.sha256}",
    )  # fmt: skip
    t.artifact_id = json.loads(body)["id"]
    return t.payload.size / MiB / seconds


def upload_ours_chunked(t: Targets) -> float:
    blobstore = str(Path(sys.executable).with_name("blobstore"))
    command = [blobstore, "upload", "--parallel", "4", "--no-resume", "--no-progress", "--json"]
    started = time.perf_counter()
    result = subprocess.run(
        [*command, "--url", t.ours.base, str(t.payload.path)], check=True, capture_output=True, text=True
    )
    seconds = time.perf_counter() - started
    if json.loads(result.stdout)[0]["artifact"]["sha256"] != t.payload.sha256:
        raise SystemExit("chunked upload: the server stored other bytes")
    return t.payload.size / MiB / seconds


def upload_nginx(t: Targets) -> float:
    assert t.nginx is not None
    target = t.nginx.root / "up" / "payload.bin"
    target.unlink(missing_ok=True)
    _, seconds = curl("-T", str(t.payload.path), f"{t.nginx.base}/up/payload.bin")
    if target.stat().st_size != t.payload.size:
        raise SystemExit("nginx PUT: wrong size stored")
    return t.payload.size / MiB / seconds


def upload_registry(t: Targets) -> float:
    assert t.registry is not None
    location = t.registry.start_upload()
    separator = "&" if "?" in location else "?"
    _, seconds = curl(
        "-X", "PUT", "-T", str(t.payload.path), "-H", "Content-Type: application/octet-stream",
        f"{location}{separator}digest=sha256:{t.payload.sha256}",
    )  # fmt: skip
    t.registry_ready = True
    return t.payload.size / MiB / seconds


def own_cpu() -> float:
    """User + system CPU time of this process so far (the clients it runs in process)."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def children_cpu() -> float:
    """User + system CPU time of this process's finished children (the clients it ran) so far."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def bench_uploads(t: Targets, runs: int) -> list[Row]:
    single = Row("single-request upload (sha256 checked, fsynced), curl -T", "MiB/s", goal="≥ 0.8")
    chunked = Row("chunked upload, `blobstore upload --parallel 4`", "MiB/s", goal="≥ 0.8")
    vs_registry = Row("single-request upload", "MiB/s", goal="≥ 1.0")
    # The MiB/s of a large upload swings with how the kernel finds page-cache pages; CPU per GiB, split into
    # user (the program) and system (the kernel), says which side moved.
    single_cpu = Row("single-request upload: server CPU per GiB", "s", higher_is_better=False)
    chunked_cpu = Row("chunked upload: server + client CPU per GiB", "s", higher_is_better=False)
    nginx_samples: list[float] = []
    registry_samples: list[float] = []
    runners: dict[str, Callable[[Targets], float]] = {
        "single": upload_ours_single,
        "chunked": upload_ours_chunked,
    }
    pids = {"single": t.ours.pid, "chunked": t.ours.pid}
    if t.nginx is not None:
        runners["nginx"] = upload_nginx
        pids["nginx"] = t.nginx.pid
    if t.registry is not None:
        runners["registry"] = upload_registry
    samples = {"single": single.ours, "chunked": chunked.ours, "nginx": nginx_samples}
    samples["registry"] = registry_samples
    # Per GiB: (server user, server system, client) of each run.
    costs: dict[str, list[tuple[float, float, float]]] = {name: [] for name in pids}
    gib = t.payload.size / (1024 * MiB)
    for run, name in rotations(list(runners), runs + 1):
        before = cpu_times(pids[name]) if name in pids else (0.0, 0.0)
        client_before = children_cpu()
        value = runners[name](t)
        if run:  # run 0 warms up
            samples[name].append(value)
            if name in pids:
                after = cpu_times(pids[name])
                client = children_cpu() - client_before
                costs[name].append(((after[0] - before[0]) / gib, (after[1] - before[1]) / gib, client / gib))
    if t.nginx is not None:
        (t.nginx.root / "up" / "payload.bin").unlink(missing_ok=True)
    single.peer_name = chunked.peer_name = "nginx PUT"
    single.peer = chunked.peer = nginx_samples
    vs_registry.ours = single.ours
    vs_registry.peer_name, vs_registry.peer = "docker-registry monolithic PUT", registry_samples
    single_cpu.ours = [user + system for user, system, _ in costs["single"]]
    chunked_cpu.ours = [user + system + client for user, system, client in costs["chunked"]]
    if costs.get("nginx"):
        single_cpu.peer_name = "nginx PUT"
        single_cpu.peer = [user + system for user, system, _ in costs["nginx"]]
        chunked_cpu.peer_name = "nginx PUT + curl"
        chunked_cpu.peer = [user + system + client for user, system, client in costs["nginx"]]
    single_cpu.note = "server user / system, client: " + split_note(costs, ours="single", nginx="nginx")
    chunked_cpu.note = "server user / system, client: " + split_note(costs, ours="chunked", nginx="nginx")
    return [single, chunked, vs_registry, single_cpu, chunked_cpu]


def split_note(costs: dict[str, list[tuple[float, float, float]]], **sides: str) -> str:
    """Median server user, server system and client CPU seconds of each side, as ``label u / s, c``."""
    parts = []
    for label, name in sides.items():
        if costs.get(name):
            user, system, client = (statistics.median(column) for column in zip(*costs[name], strict=True))
            parts.append(f"{label} {user:.2f} / {system:.2f}, {client:.2f}")
    return "; ".join(parts)


def bench_downloads(t: Targets, runs: int) -> list[Row]:
    size = t.payload.size
    urls = {"ours": t.content_url}
    if sha256_of_url(t.content_url) != t.payload.sha256:
        raise SystemExit("ours: downloaded bytes differ from the upload")
    if t.nginx is not None:
        urls["nginx"] = f"{t.nginx.base}/payload.bin"
    if t.registry is not None and t.registry_ready:
        urls["registry"] = t.registry.blob_url(t.payload.sha256)
        if sha256_of_url(urls["registry"]) != t.payload.sha256:
            raise SystemExit("docker-registry: downloaded bytes differ")
    if t.front is not None:
        urls["front"] = t.content_url.replace(t.ours.base, t.front, 1)
        if sha256_of_url(urls["front"]) != t.payload.sha256:
            raise SystemExit("ours behind nginx: downloaded bytes differ")
    samples: dict[str, list[float]] = {name: [] for name in urls}
    for run, name in rotations(list(urls), runs + 1):
        value = download_mib_s(urls[name], size)
        if run:
            samples[name].append(value)
    ours, peer = samples["ours"], samples.get("nginx", [])
    front = Row(
        "full download, curl, through deploy/nginx-single.conf (sent by nginx: X-Accel-Redirect)",
        "MiB/s",
        samples.get("front", []),
        "nginx",
        peer,
        "≥ 0.9",
    )
    front.note = "the request and its answer's headers pass through ours; nginx sends the blob file"
    return [
        Row("full download, curl", "MiB/s", ours, "nginx", peer, "≥ 0.9"),
        Row("full download, curl", "MiB/s", ours, "docker-registry", samples.get("registry", []), "≥ 1.0"),
        front,
        Row(
            "full download through nginx-single.conf",
            "MiB/s",
            front.ours,
            "docker-registry",
            samples.get("registry", []),
            "≥ 1.0",
        ),
    ]


def bench_ranges(t: Targets, runs: int, seconds: int, work: Path) -> list[Row]:
    length = 64 * KiB
    offset = (t.payload.size // 3) // 4096 * 4096
    got = subprocess.run(
        ["curl", "-sS", "-H", f"Range: bytes={offset}-{offset + length - 1}", t.content_url],
        check=True,
        capture_output=True,
    ).stdout
    if got != t.payload.slice(offset, length):
        raise SystemExit("ours: a ranged read returned other bytes")
    urls = {"ours": (t.content_url, t.ours.pid)}
    if t.nginx is not None:
        urls["nginx"] = (f"{t.nginx.base}/payload.bin", t.nginx.pid)
    row = Row("64 KiB random ranges, wrk, 4 connections", "req/s", peer_name="nginx", goal="≥ 0.3")
    # CPU time per request barely depends on how busy the machine is, unlike requests per second.
    cpu = Row("64 KiB random ranges: server CPU per request", "ms", peer_name="nginx", higher_is_better=False)
    cpu.note = "utime + stime of the server's processes / requests"
    samples = {"ours": (row.ours, cpu.ours), "nginx": (row.peer, cpu.peer)}
    for _, name in rotations(list(urls), runs):
        url, pid = urls[name]
        cpu_before = cpu_seconds(pid)
        rate, done = wrk_ranges(url, t.payload.size, length, seconds, 4, work)
        samples[name][0].append(rate)
        samples[name][1].append((cpu_seconds(pid) - cpu_before) * 1000 / done)
    return [row, cpu]


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


def bench_small_uploads(t: Targets, runs: int, count: int) -> list[Row]:
    row = Row("1 KiB single-request uploads, 16 in flight, httpx", "uploads/s", goal="≥ 1,000 (absolute)")
    # Client and server share this machine's cores: the sum of their CPU per upload bounds the rate
    # (``os.cpu_count()`` cores / that sum), whatever either side's latency.
    cpu = Row("1 KiB uploads: server + client CPU per upload", "ms", higher_is_better=False)
    urls: dict[str, tuple[Callable[[int], str], str, list[float]]] = {
        "ours": (lambda n: f"{t.ours.base}/v1/artifacts?name=small-{n}.bin", "POST", row.ours)
    }
    pids = {"ours": t.ours.pid}
    if t.nginx is not None:
        nginx_base = t.nginx.base
        urls["nginx"] = (lambda n: f"{nginx_base}/up/small-{n}.bin", "PUT", row.peer)
        pids["nginx"] = t.nginx.pid
        row.peer_name, row.note = "nginx PUT (not fsynced)", "reference only"
    # Per upload, ms: (server user, server system, client) of each run.
    costs: dict[str, list[tuple[float, float, float]]] = {name: [] for name in urls}
    for run, name in rotations(list(urls), runs + 1):
        make_url, method, samples = urls[name]
        uploads = count if run else count // 4
        before, client_before = cpu_times(pids[name]), own_cpu()
        value = asyncio.run(small_uploads(make_url, method, uploads, 16))
        if run:  # run 0 warms up
            samples.append(value)
            after, client = cpu_times(pids[name]), own_cpu() - client_before
            per = 1000 / uploads
            costs[name].append(((after[0] - before[0]) * per, (after[1] - before[1]) * per, client * per))
    cpu.ours = [sum(parts) for parts in costs["ours"]]
    if costs.get("nginx"):
        cpu.peer_name, cpu.peer = "nginx PUT + httpx", [sum(parts) for parts in costs["nginx"]]
    bound = 1000 * (os.cpu_count() or 1) / statistics.median(cpu.ours)
    cpu.note = (
        f"server user / system, client: {split_note(costs, ours='ours', nginx='nginx')}; "
        f"{os.cpu_count()} cores at this CPU per upload: at most {bound:,.0f} uploads/s"
    )
    return [row, cpu]


def bench_mcp(t: Targets, runs: int, ops: int, windows: int, work: Path) -> tuple[list[Row], float]:
    """4 KiB read latency next to server-filesystem, and 1 MiB windows next to HTTP ranges of the same."""
    small = os.urandom(4 * KiB)
    files = work / "files"
    files.mkdir()
    (files / "small.bin").write_bytes(small)
    created = httpx.post(f"{t.ours.base}/v1/artifacts?name=small.bin", content=small).json()
    ours_argv = [str(Path(sys.executable).with_name("blobstore")), "mcp", "--data-dir", str(t.ours.data_dir)]
    latency = Row(
        "4 KiB MCP read (stdio, minimal client), median", "ms", higher_is_better=False, goal="≤ 1.0"
    )
    window_row = Row("1 MiB MCP windows (stdio) vs HTTP ranges of the same windows", "MiB/s", goal="≥ 0.5")
    window_row.peer_name = "ours over HTTP"
    rng = random.Random(1)
    offsets = [rng.randrange(0, max(1, t.payload.size - MiB)) for _ in range(windows)]
    expected = {offset: hashlib.sha256(t.payload.slice(offset, MiB)).hexdigest() for offset in offsets}
    with ExitStack() as stack:
        ours = RawStdioClient(ours_argv)
        stack.callback(ours.close)
        readers: dict[str, Callable[[], bytes]] = {
            "ours": synchronous(ours.window_reader(f"blobstore://artifacts/{created['id']}", False))
        }
        peer_ok = PEER_DIR.joinpath("dist", "index.js").exists() and find_binary("node") is not None
        if peer_ok:
            peer = RawStdioClient([str(find_binary("node")), str(PEER_DIR / "dist" / "index.js"), str(files)])
            stack.callback(peer.close)
            readers["peer"] = synchronous(peer.media_reader(files / "small.bin"))
            latency.peer_name = "server-filesystem"
        else:
            latency.note = f"server-filesystem missing: run `npm ci --prefix {BENCH_DIR}`"
        samples = {"ours": latency.ours, "peer": latency.peer}
        for run, name in rotations(list(readers), runs + 1):
            seconds = []
            for _ in range(ops):
                started = time.perf_counter()
                data = readers[name]()
                seconds.append(time.perf_counter() - started)
                if data != small:
                    raise SystemExit(f"{name}: 4 KiB read returned other bytes")
            if run:
                samples[name].append(statistics.median(seconds) * 1000)

        http = stack.enter_context(httpx.Client(timeout=60))
        window_readers: dict[str, Callable[[int], bytes]] = {
            "mcp": lambda offset: synchronous(
                ours.window_reader(window_uri(t.artifact_id, offset, MiB), False)
            )(),
            "http": lambda offset: (
                http.get(t.content_url, headers={"range": f"bytes={offset}-{offset + MiB - 1}"}).content
            ),
        }
        # The least stdio server, in the same rotation: one prepared window's line written per request.
        bare = RawStdioClient([sys.executable, str(BENCH_DIR / "bare_mcp.py")])
        stack.callback(bare.close)
        window_readers["bare"] = lambda offset: synchronous(bare.window_reader("bare://window", False))()
        bare_row = Row(
            "ceiling: 1 MiB windows from a bare stdio server (one prepared answer), the same client",
            "MiB/s",
            peer_name="ours over HTTP",
            peer=window_row.peer,
            goal="bounds the windows row (≥ 0.5)",
        )
        window_samples = {"mcp": window_row.ours, "http": window_row.peer, "bare": bare_row.ours}
        for _, name in rotations(list(window_readers), runs):
            started = time.perf_counter()
            got = [window_readers[name](offset) for offset in offsets]
            window_samples[name].append(len(offsets) / (time.perf_counter() - started))
            for offset, data in zip(offsets, got, strict=True):
                if name == "bare":
                    if len(data) != MiB:
                        raise SystemExit("bare stdio server: a window of another length")
                elif hashlib.sha256(data).hexdigest() != expected[offset]:
                    raise SystemExit(f"{name}: window at {offset} returned other bytes")
        mcp_peak = peak_rss_mib(ours.process.pid)
    # The client reads one window after the other: its own decoding alone bounds the windows row.
    decoding = Row(
        "ceiling: the minimal MCP client's own decoding of 1 MiB windows (json.loads, base64)",
        "MiB/s",
        [window_decoding(max(windows, 8)) for _ in range(runs)],
        "ours over HTTP",
        window_row.peer,
        goal="bounds the windows row (≥ 0.5)",
    )
    bare_row.note = (
        f"ours is {statistics.median(window_row.ours) / statistics.median(bare_row.ours):.2f} of it"
    )
    return [latency, window_row, decoding, bare_row], mcp_peak


def window_decoding(rounds: int) -> float:
    """MiB/s of the minimal client's own work on 1 MiB windows: ``json.loads`` of the answer's line and the
    standard library's base64 decoding of its blob, as ``RawStdioClient.window_reader`` does per window."""
    blob = base64.b64encode(os.urandom(MiB)).decode()
    contents = [{"uri": "blobstore://artifacts/a", "mimeType": "application/octet-stream", "blob": blob}]
    result = {"contents": contents}
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "result": result}).encode()
    started = time.perf_counter()
    for _ in range(rounds):
        message = json.loads(line)
        if len(base64.b64decode(message["result"]["contents"][0]["blob"])) != MiB:
            raise SystemExit("window decoding: wrong length")
    return rounds / (time.perf_counter() - started)


# -- ceilings: the least app on the same server ----------------------------------------------------------


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


# -- report ------------------------------------------------------------------------------------------------


def tool_version(*argv: str) -> str:
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except OSError:
        return "missing"
    text = (result.stdout or result.stderr).strip().splitlines()
    # First line, up to the build details (curl lists every library it links).
    return text[0].split(" (")[0].split(" [")[0] if text else "unknown"


def render(args: argparse.Namespace, rows: list[Row], extra: list[str], load: tuple[str, str]) -> str:
    command = " ".join(["bench/run.py", *sys.argv[1:]])
    lines = [
        f"# Benchmark suite, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC",
        "",
        f"`.venv/bin/python {command}`",
        "",
        f"- machine: nproc {os.cpu_count()}, {cpu_model()}, Linux {platform.release()}; "
        f"load average before {load[0]}, after {load[1]}",
        f"- ours: mcp-blobstore {version('mcp-blobstore')}, Python {platform.python_version()}, "
        f"granian {version('granian')}, local disk + SQLite",
        f"- peers: {tool_version('nginx', '-v')}; {tool_version('docker-registry', '--version')}; "
        f"server-filesystem {package_version(PEER_DIR)} on Node.js {tool_version('node', '--version')}",
        f"- clients: {tool_version('curl', '--version')}; {tool_version('wrk', '--version')}; "
        f"httpx {version('httpx')}",
        f"- payload {args.size_mib} MiB of random bytes; medians of {args.runs} runs after one warm-up, "
        "order of ours and peers rotated every run",
        "",
        "Ratio is ours / peer (for ms: lower is better, the goal is a ceiling).",
        "",
        "| workload | unit | ours | peer | ratio | goal | note |",
        "| --- | --- | ---: | ---: | ---: | --- | --- |",
        *("| " + " | ".join(row.cells()) + " |" for row in rows),
        "",
        *extra,
        "",
    ]
    return "\n".join(lines)


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


def scale_rows(args: argparse.Namespace, only: set[str], work: Path) -> list[Row]:
    """Cleanup of ``--scale-count`` expired artifacts against a tenth as many, and a deep ``resources/list``
    page of a store that large against its first page. One store of ``--scale-count`` serves both: listed
    first, then expired and cleaned up."""
    count = args.scale_count
    rows: list[Row] = []
    big = scale.fill(work / "scale-big", count, seed=1)
    filled = f"filled in {big.fill_seconds:.0f} s ({count / big.fill_seconds:,.0f} puts/s)"
    if "list" in only:
        listed = scale.time_list(big, args.runs, args.list_ops, rotations)
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
        small = scale.fill(work / "scale-small", count // 10, seed=2)
        small_seconds = scale.timed_cleanup(small)
        big_seconds = scale.timed_cleanup(big)
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
            rows += scale_rows(args, only, work)
    load_after = " ".join(f"{x:.2f}" for x in os.getloadavg())
    report = render(args, rows, extra, (load_before, load_after))
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(report)
    print(report)


if __name__ == "__main__":
    main()

"""The upload workloads of the suite (``uploads``, ``small``): large single-request and chunked uploads next
to nginx and docker-registry with the CPU they cost, and 1 KiB uploads 16 in flight with theirs."""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from clients import MiB, children_cpu, curl, own_cpu, small_uploads
from harness import Row, Targets, cpu_times, rotations, split_note

from blobstore.storage.writeback import Writeback


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


def write_durably(t: Targets) -> float:
    """The payload written to a new file on the file system of ours' data directory and fsynced, in 1 MiB
    writes with its writeback started every 8 MiB as the store's writer does: what a durable upload of it
    costs here at the least, with no hashing and no network. MiB/s."""
    target = t.ours.data_dir.parent / "durable-write.bin"
    target.unlink(missing_ok=True)
    buffer = bytearray(MiB)
    with t.payload.path.open("rb", buffering=0) as source:
        started = time.perf_counter()
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            writeback = Writeback(fd)
            while length := source.readinto(buffer):
                os.write(fd, memoryview(buffer)[:length])
                writeback.wrote(length)
            os.fsync(fd)
        finally:
            os.close(fd)
        seconds = time.perf_counter() - started
    size = target.stat().st_size
    target.unlink()
    if size != t.payload.size:
        raise SystemExit("durable write: wrong size written")
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


def bench_uploads(t: Targets, runs: int) -> list[Row]:
    single = Row("single-request upload (sha256 checked, fsynced), curl -T", "MiB/s", goal="≥ 0.8")
    chunked = Row("chunked upload, `blobstore upload --parallel 4`", "MiB/s", goal="≥ 0.8")
    vs_registry = Row("single-request upload", "MiB/s", goal="≥ 1.0")
    durable = Row("ceiling: the payload written and fsynced on the store's disk (no hashing)", "MiB/s")
    durable.goal = "bounds durable uploads (≥ 0.8)"
    # The MiB/s of a large upload swings with how the kernel finds page-cache pages; CPU per GiB, split into
    # user (the program) and system (the kernel), says which side moved.
    single_cpu = Row("single-request upload: server CPU per GiB", "s", higher_is_better=False)
    chunked_cpu = Row("chunked upload: server + client CPU per GiB", "s", higher_is_better=False)
    nginx_samples: list[float] = []
    registry_samples: list[float] = []
    runners: dict[str, Callable[[Targets], float]] = {
        "single": upload_ours_single,
        "chunked": upload_ours_chunked,
        "durable": write_durably,
    }
    pids = {"single": t.ours.pid, "chunked": t.ours.pid}
    if t.nginx is not None:
        runners["nginx"] = upload_nginx
        pids["nginx"] = t.nginx.pid
    if t.registry is not None:
        runners["registry"] = upload_registry
    samples = {"single": single.ours, "chunked": chunked.ours, "durable": durable.ours}
    samples["nginx"], samples["registry"] = nginx_samples, registry_samples
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
    single.peer_name = chunked.peer_name = durable.peer_name = "nginx PUT"
    single.peer = chunked.peer = durable.peer = nginx_samples
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
    return [single, chunked, durable, vs_registry, single_cpu, chunked_cpu]


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

"""The HTTP read workloads of the suite (``downloads``, ``ranges``): full downloads, direct and through
``deploy/nginx-single.conf``, next to nginx and docker-registry, and random 64 KiB ranges under wrk next to
nginx with the server CPU per request."""

from __future__ import annotations

import subprocess
from pathlib import Path

from clients import KiB, download_mib_s, sha256_of_url, wrk_ranges
from harness import Row, Targets, cpu_seconds, rotations


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

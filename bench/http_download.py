"""Full-download throughput of ``blobstore serve`` under each ASGI server, side by side with nginx.

For each server (uvicorn, granian, hypercorn) it starts ``blobstore serve`` on a fresh local-disk data
directory, uploads one artifact (256 MiB by default), checks that a download is byte-identical, then times
full downloads with curl (a C client, so the client is not the bottleneck). nginx serves the very same blob
file with ``sendfile on`` as the reference. Usage::

    python bench/http_download.py [--size-mib 256] [--runs 5] [--servers uvicorn,granian,hypercorn]

Needs ``curl`` and, for the reference row, ``nginx`` on PATH (``apt-get install -y nginx``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from clients import MiB, write_random_file
from harness import find_binary, free_port, running_nginx, stop, wait_ready

SERVERS = ("uvicorn", "granian", "hypercorn")


def curl_download(url: str) -> tuple[int, float]:
    """(bytes, seconds) of one full download to /dev/null."""
    result = subprocess.run(
        ["curl", "-s", "-o", "/dev/null", "-w", "%{size_download} %{time_total}", url],
        check=True,
        capture_output=True,
        text=True,
    )
    size, seconds = result.stdout.split()
    return int(size), float(seconds)


def sha256_of_download(url: str) -> str:
    digest = hashlib.sha256()
    with subprocess.Popen(["curl", "-s", url], stdout=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        for block in iter(lambda: proc.stdout.read(MiB), b""):  # type: ignore[union-attr]
            digest.update(block)
    return digest.hexdigest()


def measure(url: str, size: int, runs: int) -> list[float]:
    curl_download(url)  # warm the page cache and the server
    speeds = []
    for _ in range(runs):
        got, seconds = curl_download(url)
        if got != size:
            raise SystemExit(f"{url}: got {got} bytes, expected {size}")
        speeds.append(size / MiB / seconds)
    return speeds


def bench_server(
    name: str, payload: Path, sha: str, size: int, runs: int, work: Path
) -> tuple[list[float], Path]:
    data_dir = work / f"data-{name}"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    blobstore = Path(sys.executable).parent / "blobstore"
    env = {**os.environ, "BLOBSTORE_LOG_LEVEL": "warning"}
    command = [str(blobstore), "serve", "--port", str(port), "--data-dir", str(data_dir), "--server", name]
    process = subprocess.Popen(command, env=env)
    try:
        wait_ready(f"{base}/readyz", process)
        created = subprocess.run(
            ["curl", "-sf", "-X", "POST", "-T", str(payload), f"{base}/v1/artifacts?name=payload.bin"],
            check=True,
            capture_output=True,
        )
        artifact = json.loads(created.stdout)
        url = f"{base}/v1/artifacts/{artifact['id']}/content"
        if sha256_of_download(url) != sha:
            raise SystemExit(f"{name}: downloaded bytes differ from the upload")
        speeds = measure(url, size, runs)
    finally:
        stop(process, signal.SIGINT)
    blob_file = max(
        (p for p in (data_dir / "blobs").rglob("*") if p.is_file()), key=lambda p: p.stat().st_size
    )
    return speeds, blob_file


def bench_nginx(blob_file: Path, size: int, runs: int, work: Path) -> list[float] | None:
    binary = find_binary("nginx")
    if binary is None:
        print("nginx not found: skipping the reference row", file=sys.stderr)
        return None
    port = free_port()
    root = work / "nginx"
    root.mkdir(exist_ok=True)
    shutil.copy(blob_file, root / "payload.bin")
    http = f"""
  sendfile on; tcp_nopush on; client_body_temp_path {root};
  server {{ listen 127.0.0.1:{port}; root {root}; }}
"""
    url = f"http://127.0.0.1:{port}/payload.bin"
    with running_nginx(binary, root, http, url):
        return measure(url, size, runs)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size-mib", type=int, default=256)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--servers", default=",".join(SERVERS))
    args = parser.parse_args()
    size = args.size_mib * MiB
    results: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-http-") as tmp:
        work = Path(tmp)
        payload = work / "payload.bin"
        sha = write_random_file(payload, size)
        blob_file: Path | None = None
        for name in args.servers.split(","):
            results[name], blob_file = bench_server(name, payload, sha, size, args.runs, work)
        if blob_file is not None:
            reference = bench_nginx(blob_file, size, args.runs, work)
            if reference is not None:
                results["nginx (sendfile)"] = reference
    base = statistics.median(results["nginx (sendfile)"]) if "nginx (sendfile)" in results else None
    print(
        f"\nfull download of {args.size_mib} MiB, median of {args.runs} runs (curl to /dev/null, loopback)\n"
    )
    print("| server | MiB/s (median) | min | max | vs nginx |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, speeds in results.items():
        ratio = f"{statistics.median(speeds) / base:.2f}" if base else "-"
        print(
            f"| {name} | {statistics.median(speeds):.0f} | {min(speeds):.0f} | {max(speeds):.0f} | {ratio} |"
        )


if __name__ == "__main__":
    main()

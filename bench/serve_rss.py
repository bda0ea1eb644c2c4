"""Resident memory of ``blobstore serve``, process by process: after start-up and after a fixed workload.

Starts ``blobstore serve`` (granian) on a fresh data directory, waits for ``/healthz`` and reads ``VmRSS`` of
every process in its tree (the process started, and granian's worker under it); then runs the same small
workload every time (1 KiB and 4 MiB uploads, full and ranged downloads, an MCP handshake, ``resources/list``
and ``resources/read`` over ``/mcp``) and reads ``VmRSS`` and the peak ``VmHWM`` again. Usage::

    .venv/bin/python bench/serve_rss.py [--runs 3]

Prints one table: the median over ``--runs`` fresh servers of each figure, per process and summed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
from harness import blobstore_serve, process_tree, status_kib

KiB = 1024
MiB = 1024 * KiB
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def snapshot(root: int, key: str) -> dict[str, float]:
    """``key`` (``VmRSS``, ``VmHWM``) in MiB of the main process and of granian's worker(s)."""
    found: dict[str, float] = {}
    for pid in process_tree(root):
        name = "main" if pid == root else "worker"
        found[name] = found.get(name, 0.0) + status_kib(pid, key) / KiB
    return found


def mcp(client: httpx.Client, base: str, session: dict[str, str], method: str, params: object) -> object:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = client.post(f"{base}/mcp/", json=body, headers={**MCP_HEADERS, **session})
    response.raise_for_status()
    if "mcp-session-id" in response.headers:
        session["mcp-session-id"] = response.headers["mcp-session-id"]
    return response.content


def workload(base: str) -> None:
    """The same requests every run, each answer checked for success."""
    with httpx.Client(timeout=60) as client:
        small = [
            client.post(f"{base}/v1/artifacts?name=s{n}.bin", content=os.urandom(KiB)) for n in range(50)
        ]
        big = client.post(f"{base}/v1/artifacts?name=big.bin", content=os.urandom(4 * MiB))
        for response in [*small, big]:
            response.raise_for_status()
        url = f"{base}/v1/artifacts/{big.json()['id']}/content"
        if len(client.get(url).content) != 4 * MiB:
            raise SystemExit("a full download came back short")
        for offset in range(0, 4 * MiB, 256 * KiB):
            ranged = client.get(url, headers={"range": f"bytes={offset}-{offset + 64 * KiB - 1}"})
            if ranged.status_code != 206 or len(ranged.content) != 64 * KiB:
                raise SystemExit(f"a ranged read answered {ranged.status_code}")
        session: dict[str, str] = {}
        hello = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "rss", "version": "1"},
        }
        mcp(client, base, session, "initialize", hello)
        mcp(client, base, session, "resources/list", {})
        mcp(
            client, base, session, "resources/read", {"uri": f"blobstore://artifacts/{small[0].json()['id']}"}
        )


def one_run(restart: bool) -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory(prefix="serve-rss-") as tmp:
        if restart:
            # What a restart finds: the data directory of an earlier run, its database migrated.
            blobstore = str(Path(sys.executable).with_name("blobstore"))
            migrate = [blobstore, "migrate", "--data-dir", str(Path(tmp) / "ours-data")]
            subprocess.run(migrate, check=True, capture_output=True)
        return measured(Path(tmp))


def measured(work: Path) -> dict[str, dict[str, float]]:
    with blobstore_serve(work) as ours:
        started = snapshot(ours.pid, "VmRSS")
        workload(ours.base)
        return {
            "RSS after start": started,
            "RSS after workload": snapshot(ours.pid, "VmRSS"),
            "peak (VmHWM)": snapshot(ours.pid, "VmHWM"),
        }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3, help="fresh servers measured")
    parser.add_argument("--restart", action="store_true", help="start on a data directory migrated before")
    args = parser.parse_args()
    runs = [one_run(args.restart) for _ in range(args.runs)]
    print(f"`{' '.join([Path(sys.executable).name, *sys.argv])}`, median of {args.runs} fresh servers, MiB\n")
    print("| figure | main process | granian worker | sum |")
    print("| --- | ---: | ---: | ---: |")
    for figure in runs[0]:
        main_mib = statistics.median(run[figure].get("main", 0.0) for run in runs)
        worker_mib = statistics.median(run[figure].get("worker", 0.0) for run in runs)
        total = statistics.median(sum(run[figure].values()) for run in runs)
        print(f"| {figure} | {main_mib:.1f} | {worker_mib:.1f} | {total:.1f} |")
    subprocess.run(["uptime"], check=False)


if __name__ == "__main__":
    main()

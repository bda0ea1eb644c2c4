"""Server and client cost of ``blobstore upload --parallel 4`` for two checkouts, alternating.

Each checkout (its own ``.venv``) serves a fresh data directory; every run uploads one random payload to each,
in alternating order, and reports wall time, the server's CPU (user + system of ``blobstore serve`` and its
children, from ``/proc/<pid>/stat``), the bytes it wrote (``write_bytes`` of ``/proc/<pid>/io``) and the
client's CPU. Run 0 warms up and is not counted. Usage (Linux)::

    .venv/bin/python bench/upload_cpu.py BASE_TREE BRANCH_TREE [--runs 4] [--size-mib 256] [--chunk-size 256K]

``--chunk-size`` (passed to ``blobstore upload``) shows the cost per chunk: small chunks make it dominate.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from harness import free_port

MiB = 1024 * 1024


def process_tree(pid: int) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False)
    pids = [pid]
    for child in found.stdout.split():
        pids += process_tree(int(child))
    return pids


def server_cost(pid: int) -> tuple[float, int]:
    """CPU seconds and bytes written so far by ``pid`` and its children."""
    seconds, written = 0.0, 0
    for each in process_tree(pid):
        try:
            fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
            seconds += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            for line in Path(f"/proc/{each}/io").read_text().splitlines():
                if line.startswith("write_bytes"):
                    written += int(line.split()[1])
        except FileNotFoundError:
            continue  # exited meanwhile
    return seconds, written


def serve(tree: Path, data_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    command = [str(tree / ".venv/bin/blobstore"), "serve", "--port", str(port), "--data-dir", str(data_dir)]
    env = {**os.environ, "BLOBSTORE_LOG_LEVEL": "warning"}
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            with urllib.request.urlopen(f"{base}/readyz"):
                return process, base
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit(f"{tree}: blobstore serve did not become ready")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", type=Path, nargs=2, help="two checkouts, each with its .venv")
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--size-mib", type=int, default=256)
    parser.add_argument("--chunk-size", help="e.g. 256K; default: the server's")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work_dir:
        work = Path(work_dir)
        payload = work / "payload.bin"
        payload.write_bytes(os.urandom(args.size_mib * MiB))
        servers = {tree: serve(tree, work / f"data-{n}") for n, tree in enumerate(args.trees)}
        rows: dict[Path, list[str]] = {tree: [] for tree in args.trees}
        try:
            for run in range(args.runs + 1):
                order = args.trees if run % 2 == 0 else args.trees[::-1]
                for tree in order:
                    process, base = servers[tree]
                    cpu_before, written_before = server_cost(process.pid)
                    client_before = resource.getrusage(resource.RUSAGE_CHILDREN)
                    started = time.perf_counter()
                    command = [str(tree / ".venv/bin/blobstore"), "upload", "--parallel", "4", "--no-resume"]
                    command += ["--no-progress", "--json", "--url", base, str(payload)]
                    if args.chunk_size:
                        command[2:2] = ["--chunk-size", args.chunk_size]
                    subprocess.run(command, check=True, capture_output=True)
                    wall = time.perf_counter() - started
                    client_after = resource.getrusage(resource.RUSAGE_CHILDREN)
                    cpu_after, written_after = server_cost(process.pid)
                    client = (client_after.ru_utime + client_after.ru_stime) - (
                        client_before.ru_utime + client_before.ru_stime
                    )
                    written = (written_after - written_before) / MiB
                    if run:
                        rows[tree].append(
                            f"{args.size_mib / wall:.0f} MiB/s ({wall:.2f} s), "
                            f"server {cpu_after - cpu_before:.2f} s CPU and {written:.0f} MiB written, "
                            f"client {client:.2f} s"
                        )
        finally:
            for process, _ in servers.values():
                process.send_signal(signal.SIGINT)
                process.wait(30)
    for tree, lines in rows.items():
        print(tree)
        for line in lines:
            print("  ", line)


if __name__ == "__main__":
    main()

"""What the benchmarks share: the servers they measure, their processes' readings, and the report.

Servers: ``blobstore serve``, its peers nginx and docker-registry, and the bare app of the ceilings. Each is
a context manager that starts the process on a free loopback port, waits until it answers, yields what the
workloads need and stops it. A missing peer binary yields None, so the suite reports it and goes on. Beside
them: the ``/proc`` readings of a server's process tree (CPU, peak RSS), the targets a workload runs against,
and the rows and header of the suite's report. The clients that drive the servers are in ``clients.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from clients import Payload

P = ParamSpec("P")
T = TypeVar("T")

BENCH_DIR = Path(__file__).resolve().parent
PEER_DIR = BENCH_DIR / "node_modules" / "@modelcontextprotocol" / "server-filesystem"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def find_binary(name: str) -> str | None:
    return shutil.which(name) or next(
        (str(p) for p in (Path("/usr/sbin") / name, Path("/usr/bin") / name) if p.exists()), None
    )


PeerStart = Callable[Concatenate[str, Path, int, P], Iterator[T]]
"""A peer server's run, given its binary, its own directory and a free port (then the caller's arguments)."""
PeerServer = Callable[Concatenate[Path, P], contextlib.AbstractContextManager[T | None]]
"""A peer server as the suite starts it: on a work folder, yielding None when its binary is not installed."""


def peer_server(name: str, directory: str) -> Callable[[PeerStart[P, T]], PeerServer[P, T]]:
    """The context manager of a peer server from its run: the run gets the installed ``name``, a new
    ``directory`` under the work folder and a free port; without the binary, None (the workloads on that
    peer are left out)."""

    def decorate(start: PeerStart[P, T]) -> PeerServer[P, T]:
        @contextlib.contextmanager
        def run(work: Path, /, *args: P.args, **kwargs: P.kwargs) -> Iterator[T | None]:
            binary = find_binary(name)
            if binary is None:
                yield None
                return
            root = work / directory
            root.mkdir()
            yield from start(binary, root, free_port(), *args, **kwargs)

        return run

    return decorate


def wait_ready(url: str, process: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{process.args!r} exited early with {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except urllib.error.HTTPError:
            return  # it answers: any status will do
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{url} did not become ready")


def stop(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    if process.poll() is None:
        process.send_signal(sig)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def children_of(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The parent pid follows the parenthesised command name, which may itself hold spaces.
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.add(int(entry.name))
    return found


def reset_peak_rss(pid: int) -> None:
    """Set VmHWM back to the current RSS (Linux >= 4.0), so the peak read afterwards is the read's own."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def process_tree(pid: int) -> list[int]:
    """``pid`` and all its descendants (granian serves from worker processes under the one started)."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children_of(current))
    return found


def status_kib(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def cpu_times(pid: int) -> tuple[float, float]:
    """User and system CPU time of the process tree so far (its workers included)."""
    ticks = os.sysconf("SC_CLK_TCK")
    user = system = 0
    for member in process_tree(pid):
        try:
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        user += int(fields[11])  # utime, stime: fields 14 and 15 of stat
        system += int(fields[12])
    return user / ticks, system / ticks


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of the process tree so far (its workers included)."""
    return sum(cpu_times(pid))


def peak_rss_mib(pid: int) -> float:
    """The largest ``VmHWM`` of the process tree: the peak resident set of its busiest process."""
    return max(status_kib(p, "VmHWM") for p in process_tree(pid)) / 1024


@dataclass
class Ours:
    base: str
    pid: int
    data_dir: Path


@contextlib.contextmanager
def blobstore_serve(work: Path) -> Iterator[Ours]:
    data_dir = work / "ours-data"
    port = free_port()
    command = [str(Path(sys.executable).with_name("blobstore")), "serve", "--port", str(port)]
    command += ["--data-dir", str(data_dir)]
    # Whole downloads are left to nginx only for requests nginx marks (`nginx_front`), never direct ones.
    env = {**os.environ, "BLOBSTORE_LOG_LEVEL": "warning", "BLOBSTORE_ACCEL_REDIRECT": ACCEL_PREFIX}
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_ready(f"{base}/readyz", process)
        yield Ours(base, process.pid, data_dir)
    finally:
        stop(process, signal.SIGINT)


@dataclass
class Nginx:
    base: str
    root: Path
    """``root/<name>`` is served at ``base/<name>``; ``PUT base/up/<name>`` writes ``root/up/<name>``."""
    version: str
    pid: int


@contextlib.contextmanager
def running_nginx(binary: str, root: Path, http: str, ready_url: str) -> Iterator[subprocess.Popen[bytes]]:
    """nginx in the foreground on a main configuration under ``root`` whose ``http`` block holds ``http``
    (every temporary path inside ``root``), once ``ready_url`` answers; stopped gracefully."""
    conf = root / "nginx.conf"
    conf.write_text(
        f"""
daemon off; worker_processes 1; pid {root}/nginx.pid; error_log {root}/error.log; user root;
events {{ worker_connections 256; }}
http {{
  access_log off; proxy_temp_path {root}; fastcgi_temp_path {root}; uwsgi_temp_path {root};
  scgi_temp_path {root};
{http}
}}
"""
    )
    process = subprocess.Popen([binary, "-c", str(conf), "-p", str(root)])
    try:
        wait_ready(ready_url, process)
        yield process
    finally:
        stop(process, signal.SIGQUIT)


@peer_server("nginx", "nginx")
def nginx(binary: str, root: Path, port: int) -> Iterator[Nginx]:
    (root / "up").mkdir()
    base = f"http://127.0.0.1:{port}"
    http = f"""
  sendfile on; tcp_nopush on; keepalive_requests 1000000; client_body_temp_path {root}/up;
  server {{
    listen 127.0.0.1:{port}; root {root};
    location /up/ {{ dav_methods PUT; client_max_body_size 0; create_full_put_path on; }}
  }}
"""
    version = subprocess.run([binary, "-v"], capture_output=True, text=True).stderr.strip()
    with running_nginx(binary, root, http, f"{base}/") as process:
        yield Nginx(base, root, version.removeprefix("nginx version: "), process.pid)


ACCEL_PREFIX = "/_blobstore/"
"""The internal location of the shipped ``deploy/nginx-single.conf``."""
SINGLE_SITE = Path(__file__).resolve().parents[1] / "deploy" / "nginx-single.conf"


@peer_server("nginx", "nginx-front")
def nginx_front(binary: str, root: Path, port: int, ours: Ours) -> Iterator[str]:
    """nginx with the shipped ``deploy/nginx-single.conf`` in front of ``ours``: its base URL (None without
    nginx). Only the ports and the storage directory of the shipped server block change."""
    site = SINGLE_SITE.read_text()
    for shipped, local in (
        ("server 127.0.0.1:8420;", f"server {ours.base.removeprefix('http://')};"),
        ("listen 80;", f"listen 127.0.0.1:{port};"),
        ("alias /var/lib/mcp-blobstore/blobs/;", f"alias {ours.data_dir / 'blobs'}/;"),
    ):
        if site.count(shipped) != 1:
            raise SystemExit(f"deploy/nginx-single.conf no longer has one {shipped!r}")
        site = site.replace(shipped, local)
    base = f"http://127.0.0.1:{port}"
    with running_nginx(binary, root, f"  client_body_temp_path {root};\n{site}", f"{base}/readyz"):
        yield base


@dataclass
class Registry:
    base: str
    version: str

    def blob_url(self, sha256: str) -> str:
        return f"{self.base}/v2/bench/blobs/sha256:{sha256}"

    def start_upload(self) -> str:
        """Open an upload session; the monolithic ``PUT <location>&digest=`` is what the workload times."""
        request = urllib.request.Request(f"{self.base}/v2/bench/blobs/uploads/", method="POST")
        with urllib.request.urlopen(request) as response:
            location: str = response.headers["Location"]
        return location if location.startswith("http") else self.base + location


@peer_server("docker-registry", "registry")
def docker_registry(binary: str, root: Path, port: int) -> Iterator[Registry]:
    conf = root / "config.yml"
    conf.write_text(
        json.dumps(
            {
                "version": 0.1,
                "log": {"level": "error", "accesslog": {"disabled": True}},
                "storage": {"filesystem": {"rootdirectory": str(root / "data")}, "delete": {"enabled": True}},
                "http": {"addr": f"127.0.0.1:{port}"},
            }
        )
    )
    version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.split()
    process = subprocess.Popen(
        [binary, "serve", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_ready(f"{base}/v2/", process)
        yield Registry(base, version[-1] if version else "unknown")
    finally:
        stop(process)


@dataclass
class Bare:
    base: str
    pid: int

    @property
    def payload_url(self) -> str:
        return f"{self.base}/payload"


@contextlib.contextmanager
def granian_factory(target: str, env: dict[str, str], ready_path: str = "/ready") -> Iterator[Bare]:
    """The factory ``target`` (``module:function`` of bench/) under granian, with the command and settings
    ``blobstore serve`` runs with (ASGI, one worker), ``env`` added to the environment."""
    port = free_port()
    command = [sys.executable, "-m", "granian", "--interface", "asgi", "--factory", "--workers", "1"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    command += ["--working-dir", str(BENCH_DIR), target]
    process = subprocess.Popen(
        command, env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_ready(f"{base}{ready_path}", process)
        yield Bare(base, process.pid)
    finally:
        stop(process, signal.SIGINT)


@contextlib.contextmanager
def bare_app(payload: Path) -> Iterator[Bare]:
    """``bench/bare_app.py`` serving ``payload`` under granian, as ``blobstore serve`` runs (one worker)."""
    with granian_factory("bare_app:app", {"BARE_FILE": str(payload)}) as bare:
        yield bare


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


# -- report ------------------------------------------------------------------------------------------------


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


def rotations(names: list[str], runs: int) -> Iterator[tuple[int, str]]:
    """``(run, name)`` with the order rotated every run: each target goes first as often as the others."""
    for run in range(runs):
        shift = run % len(names)
        for name in names[shift:] + names[:shift]:
            yield run, name


def split_note(costs: dict[str, list[tuple[float, float, float]]], **sides: str) -> str:
    """Median server user, server system and client CPU seconds of each side, as ``label u / s, c``."""
    parts = []
    for label, name in sides.items():
        if costs.get(name):
            user, system, client = (statistics.median(column) for column in zip(*costs[name], strict=True))
            parts.append(f"{label} {user:.2f} / {system:.2f}, {client:.2f}")
    return "; ".join(parts)


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def command_output(*argv: str) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def package_version(directory: Path) -> str:
    try:
        return str(json.loads((directory / "package.json").read_text())["version"])
    except (OSError, KeyError, ValueError):
        return "unknown"


def tool_version(*argv: str) -> str:
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except OSError:
        return "missing"
    text = (result.stdout or result.stderr).strip().splitlines()
    # First line, up to the build details (curl lists every library it links).
    return text[0].split(" (")[0].split(" [")[0] if text else "unknown"


def render(
    args: argparse.Namespace,
    rows: list[Row],
    extra: list[str],
    load: tuple[str, str],
    title: str = "Benchmark suite",
) -> str:
    command = " ".join([f"bench/{Path(sys.argv[0]).name}", *sys.argv[1:]])
    lines = [
        f"# {title}, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC",
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

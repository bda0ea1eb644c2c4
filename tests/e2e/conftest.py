"""A real ``blobstore serve`` process on a free loopback port with a temporary data directory."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

BLOBSTORE = Path(sys.executable).with_name("blobstore")
START_DEADLINE_SECONDS = 60.0
STOP_DEADLINE_SECONDS = 15.0


@dataclass(frozen=True)
class Server:
    url: str
    data_dir: Path
    log: Path
    process: subprocess.Popen[bytes]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def cli_env(tmp: Path, url: str) -> dict[str, str]:
    """Environment for CLI subprocesses: the server's URL and a private cache for resume state."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BLOBSTORE_")}
    env.update({"BLOBSTORE_URL": url, "XDG_CACHE_HOME": str(tmp / "cache"), "COLUMNS": "120"})
    return env


def wait_ready(process: subprocess.Popen[bytes], url: str, log: Path) -> None:
    """Poll ``/readyz`` until the server answers 200; an exited process or a passed deadline is an error."""
    deadline = time.monotonic() + START_DEADLINE_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}:\n{log.read_text(errors='replace')}")
        try:
            if httpx.get(f"{url}/readyz", timeout=2.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"server did not become ready:\n{log.read_text(errors='replace')}")


def start_server(root: Path, *args: str, env: dict[str, str] | None = None) -> Server:
    """``blobstore serve`` on a free loopback port with ``root/data``; ``args`` are extra flags, ``env`` extra
    ``BLOBSTORE_*`` variables (the caller's own ones are dropped so that the test alone decides)."""
    port = free_port()
    data_dir = root / "data"
    log = root / "server.log"
    environment = {k: v for k, v in os.environ.items() if not k.startswith("BLOBSTORE_")}
    environment.update(env or {})
    command = [
        str(BLOBSTORE),
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--data-dir",
        str(data_dir),
    ]
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*command, *args], stdout=out, stderr=subprocess.STDOUT, env=environment, start_new_session=True
        )
    server = Server(f"http://127.0.0.1:{port}", data_dir, log, process)
    try:
        wait_ready(process, server.url, log)
    except BaseException:
        stop_server(server)
        raise
    return server


def stop_server(server: Server) -> None:
    process = server.process
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(STOP_DEADLINE_SECONDS)
        except subprocess.TimeoutExpired:
            # The server leads its own session (start_new_session), so this reaches only its workers.
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    running = start_server(tmp_path_factory.mktemp("server"))
    try:
        yield running
    finally:
        stop_server(running)

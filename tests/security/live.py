"""A real ``blobstore serve`` process for the security tests, its stderr and audit log kept as registered log
files, and the ``blobstore`` CLI as a subprocess."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.security import leaks

BLOBSTORE = str(Path(sys.executable).with_name("blobstore"))
START_DEADLINE_SECONDS = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def clean_env(root: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BLOBSTORE_")}
    env.update({"BLOBSTORE_DATA_DIR": str(root / "data"), "BLOBSTORE_AUDIT_LOG": str(root / "audit.jsonl")})
    env.update(extra)
    leaks.register_log(root / "audit.jsonl")
    return env


def run_cli(args: Sequence[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [BLOBSTORE, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def create_token(env: dict[str, str], namespace: str, scopes: str = "read,write") -> dict[str, Any]:
    done = run_cli(["token", "create", "--namespace", namespace, "--scopes", scopes, "--json"], env)
    assert done.returncode == 0, done.stderr
    facts: dict[str, Any] = json.loads(done.stdout)
    leaks.register_secret(facts["token"])
    return facts


@dataclass
class LiveServer:
    url: str
    root: Path
    stderr: Path
    process: subprocess.Popen[bytes]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def log_text(self) -> str:
        return self.stderr.read_text(errors="replace")


def start(
    root: Path, env: dict[str, str], *, host: str = "127.0.0.1", extra_args: Sequence[str] = ()
) -> LiveServer:
    """Start ``blobstore serve``; wait until it answers (or has exited, which the caller then inspects)."""
    port = free_port()
    stderr = leaks.register_log(root / f"serve-{port}.log")
    with stderr.open("wb") as out:
        process = subprocess.Popen(
            [BLOBSTORE, "serve", "--host", host, "--port", str(port), "--server", "uvicorn", *extra_args],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    server = LiveServer(f"http://127.0.0.1:{port}", root, stderr, process)
    deadline = time.monotonic() + START_DEADLINE_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return server
        try:
            if httpx.get(f"{server.url}/healthz", timeout=2).status_code == 200:
                return server
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    server.stop()
    raise RuntimeError(f"server did not start:\n{server.log_text()}")

"""A 1 GiB CLI upload, killed once the server holds over 40 %, resumes without resending what it has."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from tests.e2e.clirun import PtyProcess
from tests.e2e.files import MiB, write_distinct_blocks
from tests.fixtures.commands import run_cli
from tests.fixtures.server import Server, cli_env, serving
from tests.fixtures.waiting import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SIZE_MIB = 1024
CHUNK = 8 * MiB
TOTAL_CHUNKS = SIZE_MIB * MiB // CHUNK
WAIT_DEADLINE_SECONDS = 240.0

T = TypeVar("T")


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[Server]:
    """A server of its own, so the gigabyte it stores is deleted with its data directory right after."""
    root = tmp_path / "server"
    root.mkdir()
    with serving(root) as running:
        yield running
    shutil.rmtree(root, ignore_errors=True)


def wait_for(probe: Callable[[], T | None], process: subprocess.Popen[bytes], what: str) -> T:
    def seen() -> T | None:
        value = probe()
        if value is None and process.poll() is not None:
            pytest.fail(f"the upload ended (exit {process.returncode}) before {what}")
        return value

    return wait_until(seen, within=WAIT_DEADLINE_SECONDS, what=what)


def upload_status(server: Server, upload_id: str) -> dict[str, Any]:
    response = httpx.get(f"{server.url}/v1/uploads/{upload_id}", timeout=30)
    response.raise_for_status()
    body: dict[str, Any] = response.json()
    return body


def test_killed_cli_upload_resumes_without_resending_chunks_the_server_has(
    own_server: Server, tmp_path: Path
) -> None:
    big = tmp_path / "big.bin"
    env = cli_env(tmp_path, own_server.url)
    state_dir = tmp_path / "cache" / "mcp-blobstore" / "uploads"
    first: PtyProcess | None = None
    try:
        expected_sha256 = write_distinct_blocks(big, SIZE_MIB)
        command = ["upload", str(big), "--chunk-size", str(CHUNK), "--json"]
        first = PtyProcess(command, env)

        def upload_id() -> str | None:
            for state in state_dir.glob("*.json"):
                return str(json.loads(state.read_text())["upload_id"])
            return None

        def past_40_percent() -> dict[str, Any] | None:
            status = upload_status(own_server, uid)
            return status if status["bytes_received"] > 0.4 * SIZE_MIB * MiB else None

        uid = wait_for(upload_id, first.process, "the resume state")
        wait_for(past_40_percent, first.process, "40 % on the server")
        os.kill(first.process.pid, signal.SIGKILL)
        first.wait()
        shown = first.output
        before = upload_status(own_server, uid)

        second = run_cli(command, env)
        after = upload_status(own_server, uid)

        assert "big.bin" in shown
        assert "━" in shown, shown[-2000:]  # rich's bar
        assert "GiB" in shown
        assert before["state"] == "open"
        had = len(before["chunks_received"])
        assert 0.4 * TOTAL_CHUNKS <= had < TOTAL_CHUNKS
        assert second.returncode == 0, second.stderr
        (result,) = json.loads(second.stdout)
        assert result["resumed"] is True
        assert result["upload_id"] == uid
        # Chunks in flight at the kill may land after `before` was read; they are skipped too, never resent.
        assert result["chunks_skipped"] >= had
        assert result["chunks_sent"] + result["chunks_skipped"] == TOTAL_CHUNKS
        assert result["bytes_sent"] <= (TOTAL_CHUNKS - had) * CHUNK
        assert after["state"] == "completed"
        assert after["artifact_id"] == result["artifact"]["id"]
        assert result["artifact"]["sha256"] == expected_sha256
        assert result["artifact"]["size"] == SIZE_MIB * MiB
        assert list(state_dir.glob("*.json")) == []
    finally:
        if first is not None and first.process.poll() is None:
            first.process.kill()
            first.wait()
        big.unlink(missing_ok=True)

"""``blobstore serve`` stopped (SIGTERM) just after a burst of small uploads: it exits well within its grace
period, every request it was still serving ends before the store closes (none fails on a closed store), and
after a restart every upload it acknowledged is there with its bytes.

The burst comes from ``wrk`` (16 connections, a new 1 KiB body each request; 32 connections and 300 KB
bodies in the other rounds), with two I/O threads in the store, so that when ``wrk`` hangs up the server
still holds a queue of uploads it took: the stop lands among them.

- Before the first fix, a request that reached a worker thread after the server's main task had ended left
  that thread waiting for a task the stopped event loop would never finish, and the process never exited.
- No request the drain cancels may have had its whole body: one once waited for granian's end-of-body
  message, which a stop can drop, until the grace ran out (``tests/api/test_body_end.py``). granian can
  also leave a request it had dispatched without any of its body on a stop; the drain cancels that one
  (its access line: status 500, fewer bytes in than the body has).
"""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fixtures.server import serving, start_server, stop_process

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROUNDS = 4
BODIES = {0: (1000, 16), 1: (300_000, 32)}
"""Body bytes and connections of a round, by its number's parity."""
PREFIX_BYTES = 22
"""What the Lua script writes before the body's filler: the round and the request's number."""
GRACE_SECONDS = 5
ENV = {
    "BLOBSTORE_LOG_LEVEL": "warning",
    "BLOBSTORE_IO_THREADS": "2",
    "BLOBSTORE_SHUTDOWN_GRACE_SECONDS": str(GRACE_SECONDS),
}
EXIT_WITHIN_SECONDS = GRACE_SECONDS + 15.0
"""The grace, then the ends of the requests it cancels and the store's close: seconds on a loaded machine."""

UPLOADS_LUA = """
local counter = 0
local out = io.open("%(acknowledged)s", "a")
local base = string.rep("x", %(size)d)
request = function()
  counter = counter + 1
  local body = string.format("%%08d-%%012d-", %(seed)d, counter) .. base
  return wrk.format("POST", "/v1/artifacts?name=stop-" .. counter .. ".bin", {}, body)
end
response = function(status, headers, body)
  if status == 201 then
    out:write(body:match('"id":"([^"]+)"') .. " " .. body:match('"sha256":"(%%x+)"') .. "\\n")
    out:flush()
  end
end
"""


def access_lines(log: str) -> list[dict[str, Any]]:
    lines = (json.loads(text) for text in log.splitlines() if text.startswith("{"))
    return [line for line in lines if line.get("event") == "http_request"]


def burst(url: str, acknowledged: Path, seed: int, tmp: Path) -> None:
    """Two seconds of ``wrk`` uploads to ``url`` (:data:`BODIES` by ``seed``); the id and SHA-256 of each
    one answered 201 are appended to ``acknowledged``."""
    size, connections = BODIES[seed % 2]
    script = tmp / "uploads.lua"
    script.write_text(UPLOADS_LUA % {"acknowledged": acknowledged, "seed": seed, "size": size})
    command = ["wrk", "-t1", f"-c{connections}", "-d2s", "-s", str(script), str(url)]
    subprocess.run(command, check=True, capture_output=True, timeout=60)


def stopped_within(process: subprocess.Popen[bytes], seconds: float) -> float | None:
    """SIGTERM to ``process``; the seconds until it exited, or None when it was still running at ``seconds``
    (it is then killed)."""
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(seconds)
    except subprocess.TimeoutExpired:
        stop_process(process)
        return None
    return time.monotonic() - started


@pytest.mark.parametrize("round_number", range(ROUNDS))
def test_a_busy_server_stops_within_its_grace_and_keeps_what_it_acknowledged(
    tmp_path: Path, round_number: int
) -> None:
    server = start_server(tmp_path, env=ENV)
    acknowledged = tmp_path / "acknowledged.txt"
    burst(server.url, acknowledged, round_number, tmp_path)
    took = stopped_within(server.process, EXIT_WITHIN_SECONDS)

    log = server.log_text()
    assert took is not None, f"still running {EXIT_WITHIN_SECONDS} s after SIGTERM:\n{log[-3000:]}"
    assert server.process.returncode == 0, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    whole = BODIES[round_number % 2][0] + PREFIX_BYTES
    lines = access_lines(log)
    assert sum(line["status"] == 201 for line in lines) >= 16, "no access lines to check"
    cut = [line for line in lines if line["status"] == 500]
    assert all(line["bytes_in"] < whole for line in cut), f"cancelled with the whole body in hand: {cut}"
    answered = dict(line.split() for line in acknowledged.read_text().splitlines())
    assert len(answered) >= 16, "the burst got too few uploads through to be a test"
    with (
        serving(tmp_path, env=ENV, data_dir=server.data_dir) as restarted,
        httpx.Client(base_url=restarted.url, timeout=60) as client,
    ):
        for artifact_id, sha256 in answered.items():
            response = client.get(f"/v1/artifacts/{artifact_id}/content")
            assert response.status_code == 200, artifact_id
            assert hashlib.sha256(response.content).hexdigest() == sha256

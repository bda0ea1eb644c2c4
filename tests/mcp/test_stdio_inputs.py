"""``blobstore mcp`` on stdin that is not a pipe: a file of requests, or the null device.

The event loop can wait only on pipes and sockets; a file, a terminal or ``/dev/null`` is read line by line in
a worker thread. Either way the server answers every request it was given and stops at the end of input.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.fixtures.commands import run_cli
from tests.fixtures.mcp_wire import initialize_request
from tests.fixtures.server import isolated_env

pytestmark = pytest.mark.e2e


def test_requests_in_a_file_are_all_answered_and_the_server_stops_at_its_end(tmp_path: Path) -> None:
    requests = [
        initialize_request("file"),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "resources/templates/list"},
    ]
    script = tmp_path / "requests.jsonl"
    script.write_text("".join(json.dumps(request) + "\n" for request in requests))
    env = isolated_env({"BLOBSTORE_DATA_DIR": str(tmp_path / "data")})

    with script.open("rb") as stdin:
        finished = run_cli(["mcp"], env, stdin=stdin.fileno())

    assert finished.returncode == 0, finished.stderr
    answers = {message["id"]: message for message in map(json.loads, finished.stdout.splitlines())}
    assert answers[1]["result"]["serverInfo"]["name"]
    templates = answers[2]["result"]["resourceTemplates"]
    assert any(t["uriTemplate"].startswith("blobstore://artifacts/") for t in templates)


def test_the_null_device_on_stdin_is_the_end_of_input(tmp_path: Path) -> None:
    env = isolated_env({"BLOBSTORE_DATA_DIR": str(tmp_path / "data")})

    finished = run_cli(["mcp"], env, stdin=subprocess.DEVNULL)

    assert finished.returncode == 0, finished.stderr
    assert finished.stdout == ""

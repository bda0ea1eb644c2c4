"""Where audit lines go: to their own file (``BLOBSTORE_AUDIT_LOG``, by default ``audit.jsonl`` in the data
directory), never onto the terminal of ``blobstore serve`` or ``blobstore token create`` unless asked for with
``BLOBSTORE_AUDIT_LOG=-`` (standard output). The server's terminal shows its access log at ``info``: one JSON
line per request."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fixtures.commands import run_cli
from tests.fixtures.server import isolated_env, start_server, stop_server
from tests.security import leaks

pytestmark = pytest.mark.e2e


def env_without_audit_setting(root: Path, **extra: str) -> dict[str, str]:
    env = isolated_env({"BLOBSTORE_DATA_DIR": str(root / "data"), **extra})
    leaks.register_log(root / "data" / "audit.jsonl")
    return env


def json_objects(text: str) -> list[dict[str, Any]]:
    """The lines of ``text`` that are JSON objects."""
    found = []
    for line in text.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


def access_lines(text: str) -> list[dict[str, Any]]:
    """The JSON access log lines (``"event": "http_request"``)."""
    return [value for value in json_objects(text) if value.get("event") == "http_request"]


def audit_records(text: str) -> list[dict[str, Any]]:
    """The audit records (JSON objects with an ``action``)."""
    return [value for value in json_objects(text) if "action" in value]


@pytest.mark.parametrize("server", ["granian", "uvicorn"])
def test_serve_writes_audit_to_the_data_dir_and_an_access_log_to_the_terminal(
    tmp_path: Path, server: str
) -> None:
    running = start_server(tmp_path, "--server", server, env=env_without_audit_setting(tmp_path))
    try:
        with httpx.Client(base_url=running.url, timeout=30) as http:
            stored = http.post("/v1/artifacts", params={"name": "seen.txt"}, content=b"audited")
            assert stored.status_code == 201
            assert http.get(f"/v1/artifacts/{stored.json()['id']}/content").content == b"audited"
    finally:
        stop_server(running)
    terminal = running.log_text()
    assert audit_records(terminal) == []
    requests = [
        (line["method"], line["path"], line["status"])
        for line in access_lines(terminal)
        if line["method"] == "POST"
    ]
    assert requests == [("POST", "/v1/artifacts", 201)]
    assert "local mode" in terminal
    audit = audit_records((tmp_path / "data" / "audit.jsonl").read_text())
    assert [(a["action"], a["result"]) for a in audit] == [("upload", "ok"), ("read", "ok")]
    assert (tmp_path / "data" / "audit.jsonl").stat().st_mode & 0o777 == 0o600


def test_token_create_audits_to_the_file_not_the_terminal(tmp_path: Path) -> None:
    done = run_cli(["token", "create", "--namespace", "quiet"], env_without_audit_setting(tmp_path))
    assert done.returncode == 0, done.stderr
    leaks.register_secret(done.stdout.strip())
    assert done.stdout.strip().startswith("bst_")
    assert audit_records(done.stdout + done.stderr) == []
    assert "only time" in done.stderr
    (record,) = audit_records((tmp_path / "data" / "audit.jsonl").read_text())
    assert (record["action"], record["namespace"], record["actor"]) == ("token_create", "quiet", "cli")


def test_audit_log_dash_writes_audit_lines_to_standard_output(tmp_path: Path) -> None:
    env = env_without_audit_setting(tmp_path, BLOBSTORE_AUDIT_LOG="-")
    # In tmp_path: a build that took "-" for a file name would leave it there, not in the checkout.
    done = run_cli(["token", "create", "--namespace", "loud"], env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (secret,) = [line for line in done.stdout.splitlines() if line.startswith("bst_")]
    leaks.register_secret(secret)
    (record,) = audit_records(done.stdout)
    assert (record["action"], record["namespace"]) == ("token_create", "loud")
    assert audit_records(done.stderr) == []
    assert not (tmp_path / "data" / "audit.jsonl").exists()

"""The transfer commands against a real server: JSON output, one-line failures, a progress bar on a terminal.

Most commands run in process through click's runner (the server is still a real process over loopback), which
saves the command's start-up time per call; the terminal test runs the installed command under a pty.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner, Result

from blobstore.cli import main
from tests.e2e.clirun import PtyProcess
from tests.fixtures.server import Server, cli_env

pytestmark = pytest.mark.e2e


def run_cli(args: list[str], env: dict[str, str]) -> Result:
    return CliRunner(env=env).invoke(main, args, catch_exceptions=False)


def test_upload_info_ls_download_rm_round_trip_with_json(server: Server, tmp_path: Path) -> None:
    env = cli_env(tmp_path, server.url)
    data = os.urandom(3 * 1024 * 1024 + 17)
    (tmp_path / "one.bin").write_bytes(data)
    (tmp_path / "two.txt").write_bytes(b"hello\n")

    uploaded = run_cli(["upload", str(tmp_path / "one.bin"), str(tmp_path / "two.txt"), "--json"], env)
    assert uploaded.exit_code == 0, uploaded.stderr
    results = json.loads(uploaded.stdout)
    assert [r["artifact"]["name"] for r in results] == ["one.bin", "two.txt"]
    assert results[0]["chunks_sent"] >= 1
    assert results[0]["chunks_skipped"] == 0
    first = results[0]["artifact"]["id"]

    info = json.loads(run_cli(["info", first, "--json"], env).stdout)
    listed = json.loads(run_cli(["ls", "--all", "--limit", "1", "--json"], env).stdout)
    fetched = run_cli(["download", first, "-o", str(tmp_path / "back.bin"), "--json"], env)
    window = run_cli(["download", first, "--offset", "100", "--length", "50", "-o", str(tmp_path / "w")], env)
    removed = json.loads(run_cli(["rm", first, "--json"], env).stdout)
    gone = run_cli(["info", first], env)

    assert info["size"] == len(data)
    ours = {first, results[1]["artifact"]["id"]}
    # Newest first: the file uploaded second is listed before the first one (one per page with --limit 1).
    assert [item["id"] for item in listed["items"] if item["id"] in ours] == [
        results[1]["artifact"]["id"],
        first,
    ]
    assert listed["next_cursor"] is None
    assert fetched.exit_code == 0
    assert json.loads(fetched.stdout)["verified"] is True
    assert (tmp_path / "back.bin").read_bytes() == data
    assert window.exit_code == 0
    assert (tmp_path / "w").read_bytes() == data[100:150]
    assert removed == [{"id": first, "deleted": True}]
    assert gone.exit_code == 1
    assert gone.stdout == ""
    assert gone.stderr == "blobstore: not found (not_found)\n"


def test_failure_is_one_line_with_the_code_and_non_zero_exit(server: Server, tmp_path: Path) -> None:
    (tmp_path / "a.bin").write_bytes(b"x" * 10)

    result = run_cli(["upload", str(tmp_path / "a.bin"), "--chunk-size", "1"], cli_env(tmp_path, server.url))

    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("blobstore: ")
    assert lines[0].endswith("(invalid_request)")


def test_token_is_never_printed(server: Server, tmp_path: Path) -> None:
    env = cli_env(tmp_path, server.url) | {"BLOBSTORE_TOKEN": "tok-very-secret"}

    result = run_cli(["info", "a_" + "x" * 24, "--json"], env)

    assert result.exit_code == 1
    assert "tok-very-secret" not in result.stdout + result.stderr


def test_upload_on_a_terminal_shows_a_progress_bar(server: Server, tmp_path: Path) -> None:
    (tmp_path / "shown.bin").write_bytes(os.urandom(4 * 1024 * 1024))

    process = PtyProcess(["upload", str(tmp_path / "shown.bin")], cli_env(tmp_path, server.url))
    code = process.wait()

    assert code == 0, process.output
    assert "shown.bin" in process.output
    assert "━" in process.output  # rich's bar
    assert "4.0/4.0 MiB" in process.output


def test_without_a_terminal_there_is_no_progress_bar(server: Server, tmp_path: Path) -> None:
    (tmp_path / "quiet.bin").write_bytes(os.urandom(1024))

    result = run_cli(["upload", str(tmp_path / "quiet.bin")], cli_env(tmp_path, server.url))

    assert result.exit_code == 0
    assert result.stderr == ""


def test_an_unreachable_server_is_reported_as_such_in_one_line(tmp_path: Path) -> None:
    # A bound socket that does not listen refuses every connection: nothing answers at this address.
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
        result = run_cli(["ls"], cli_env(tmp_path, url))

    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == f"blobstore: blobstore server at {url} is unreachable (server_unreachable)\n"


def test_download_length_zero_is_refused_like_http_and_writes_nothing(server: Server, tmp_path: Path) -> None:
    env = cli_env(tmp_path, server.url)
    (tmp_path / "a.bin").write_bytes(b"0123456789")
    artifact_id = json.loads(run_cli(["upload", str(tmp_path / "a.bin"), "--json"], env).stdout)[0][
        "artifact"
    ]["id"]
    over_http = httpx.get(
        f"{server.url}/v1/artifacts/{artifact_id}/content", params={"offset": 2, "length": 0}
    )
    out = tmp_path / "out"
    out.mkdir()

    result = run_cli(
        ["download", artifact_id, "--offset", "2", "--length", "0", "-o", str(out / "w.bin")], env
    )

    assert over_http.status_code == 400
    problem = over_http.json()
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == f"blobstore: {problem['detail']} ({problem['code']})\n"
    assert list(out.iterdir()) == []

"""The ``blobstore proxy`` command: start-up errors, the read tool's name, exit status, HTTP upstreams."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from tests.fixtures.ports import free_port
from tests.fixtures.server import start_server, stop_server
from tests.fixtures.waiting import wait_until, wait_until_async
from tests.proxy.conftest import (
    EVERYTHING_SERVER,
    PYTHON_UPSTREAM,
    TIMEOUT,
    blobstore_command,
    proxy_command,
    proxy_params,
    raw_peer,
)


def run_proxy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [blobstore_command(), "proxy", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
    )


def test_a_bad_offload_config_is_one_line_at_start_and_a_failure(tmp_path: Path) -> None:
    config = tmp_path / "offload.toml"
    config.write_text("text_threshold = -5\n")
    done = run_proxy(
        "--data-dir", str(tmp_path / "d"), "--offload-config", str(config), "--", *PYTHON_UPSTREAM
    )
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "text_threshold" in lines[0]
    assert str(config) in lines[0]


def test_a_missing_offload_config_is_one_line_at_start(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    done = run_proxy(
        "--data-dir", str(tmp_path / "d"), "--offload-config", str(missing), "--", *PYTHON_UPSTREAM
    )
    assert done.returncode != 0
    assert len(done.stderr.strip().splitlines()) == 1
    assert str(missing) in done.stderr


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--upstream-url", "ftp://example.invalid/mcp"],
        ["--upstream-url", "http://127.0.0.1:9/mcp", "--", "true"],
        ["--upstream-url", "http://127.0.0.1:9/mcp", "--upstream-header", "no colon here"],
    ],
)
def test_a_bad_upstream_choice_is_one_line_at_start(tmp_path: Path, args: list[str]) -> None:
    done = run_proxy("--data-dir", str(tmp_path / "d"), *args)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1


def test_an_upstream_command_that_does_not_exist_is_one_line(tmp_path: Path) -> None:
    done = run_proxy("--data-dir", str(tmp_path / "d"), "--", str(tmp_path / "no-such-server"))
    assert done.returncode != 0
    assert "no-such-server" in done.stderr


def test_help_shows_the_host_profiles_and_their_default() -> None:
    done = run_proxy("--help")
    assert done.returncode == 0
    shown = " ".join((done.stderr + done.stdout).split())
    for name in ("claude-desktop", "claude-code", "generic", "clientInfo at initialize, else generic"):
        assert name in shown


async def test_a_clashing_tool_name_gets_a_prefix_said_on_stderr(tmp_path: Path) -> None:
    command = proxy_command(tmp_path / "d", [*PYTHON_UPSTREAM, "--clash"])
    async with raw_peer(command, stderr=asyncio.subprocess.PIPE) as peer:
        await peer.handshake()
        tools = json.loads(await peer.request(1, "tools/list", {}))["result"]["tools"]
        names = [t["name"] for t in tools]
        assert names.count("read_artifact") == 1
        assert names[-1] == "blobstore_read_artifact"
        theirs = json.loads(await peer.request(2, "tools/call", {"name": "read_artifact", "arguments": {}}))
        assert theirs["result"]["content"][0]["text"] == "upstream read_artifact"
        ours = json.loads(
            await peer.request(
                3, "tools/call", {"name": "blobstore_read_artifact", "arguments": {"uri": "x"}}
            )
        )
        assert ours["result"]["isError"] is True
        assert await peer.close() == 0
        assert peer.process.stderr is not None
        stderr = (await peer.process.stderr.read()).decode()
    assert "blobstore_read_artifact" in stderr


async def test_no_read_tool_lists_only_the_upstreams_tools(tmp_path: Path) -> None:
    async with Client(
        proxy_params(tmp_path / "d", PYTHON_UPSTREAM, "--no-read-tool"), mode="legacy"
    ) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert "read_artifact" not in names
        assert "echo" in names
        result = await client.call_tool("big_text", {"size": 2_000_000})
        texts = " ".join(getattr(b, "text", "") for b in result.content)
        assert "read_artifact" not in texts
        assert any(b.type == "resource_link" for b in result.content)


async def test_a_dead_upstream_answers_pending_and_later_calls_and_the_proxy_exits_non_zero(
    tmp_path: Path,
) -> None:
    async with raw_peer(proxy_command(tmp_path / "d", PYTHON_UPSTREAM)) as peer:
        await peer.handshake()
        await peer.send({"jsonrpc": "2.0", "id": "slow", "method": "tools/call", "params": {"name": "die"}})
        answer = json.loads(await peer.response("slow"))
        assert answer["error"]["code"] == -32603
        assert answer["error"]["data"]["reason"] == "upstream_unavailable"
        status = await asyncio.wait_for(peer.process.wait(), TIMEOUT)
    assert status != 0


async def test_the_host_closing_stdin_ends_the_proxy_and_the_upstream_with_status_zero(
    tmp_path: Path,
) -> None:
    async with raw_peer(proxy_command(tmp_path / "d", PYTHON_UPSTREAM)) as peer:
        await peer.handshake()
        assert json.loads(await peer.request(1, "ping", {}))["result"] == {}
        assert await peer.close() == 0


@pytest.fixture
def everything_http() -> Iterator[str]:
    """server-everything over streamable HTTP, as a real child process."""
    port = free_port()
    process = subprocess.Popen(
        ["node", str(EVERYTHING_SERVER), "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/mcp"

    def answers() -> bool:
        assert process.poll() is None, "server-everything did not start"
        try:
            httpx.get(url, timeout=1)
        except httpx.TransportError:
            return False
        return True

    try:
        wait_until(answers, within=TIMEOUT, what="server-everything to listen")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=TIMEOUT)


@pytest.mark.usefixtures("npm_servers")
async def test_a_streamable_http_upstream_is_relayed(tmp_path: Path, everything_http: str) -> None:
    params = StdioServerParameters(
        command=blobstore_command(),
        args=[
            "proxy",
            "--data-dir",
            str(tmp_path / "d"),
            "--upstream-url",
            everything_http,
            "--upstream-header",
            "X-Test: yes",
        ],
    )
    reported: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reported.append(progress)

    async with Client(params, mode="legacy") as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert "echo" in names
        assert names[-1] == "read_artifact"
        echo = await client.call_tool("echo", {"message": "over http"})
        assert "over http" in json.dumps(echo.model_dump(mode="json"))
        slow = await client.call_tool(
            "trigger-long-running-operation", {"duration": 1, "steps": 2}, progress_callback=on_progress
        )
        assert not slow.is_error
        assert reported == [1.0, 2.0]


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found.extend(int(c) for c in (task / "children").read_text().split())
    return found


async def test_killing_the_upstream_fails_the_pending_call_and_ends_the_proxy(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    async with raw_peer(proxy_command(tmp_path / "d", PYTHON_UPSTREAM)) as peer:
        await peer.handshake()
        call = {"name": "block", "arguments": {"marker": str(marker)}}
        await peer.send({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": call})
        await wait_until_async(marker.exists, within=TIMEOUT, what="the upstream to start the call")
        (upstream,) = children(peer.process.pid)
        os.kill(upstream, signal.SIGKILL)
        answer = json.loads(await peer.response(9))
        assert answer["error"]["data"]["reason"] == "upstream_unavailable"
        assert "killed by signal 9" in answer["error"]["message"]
        assert await asyncio.wait_for(peer.process.wait(), TIMEOUT) == 1


@pytest.fixture
def store_http(tmp_path: Path) -> Iterator[str]:
    """``blobstore serve`` (its stateless /mcp speaks both eras) as a streamable-HTTP upstream."""
    server = start_server(tmp_path, data_dir=tmp_path / "upstream")
    try:
        yield f"{server.url}/mcp"
    finally:
        stop_server(server)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_streamable_http_upstream_is_relayed_in_both_eras(
    tmp_path: Path, store_http: str, mode: str
) -> None:
    params = StdioServerParameters(
        command=blobstore_command(),
        args=["proxy", "--data-dir", str(tmp_path / "d"), "--upstream-url", store_http],
    )
    async with Client(params, mode=mode) as client:
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        names = [t.name for t in (await client.list_tools()).tools]
        # The upstream has its own read_artifact: the proxy's gets the prefix.
        assert names[-2:] == ["read_artifact", "blobstore_read_artifact"]
        begun = await client.call_tool("upload_begin", {"name": "x.txt", "size": 5})
        assert begun.structured_content is not None
        upload_id = begun.structured_content["upload_id"]
        status = await client.call_tool("upload_status", {"upload_id": upload_id})
        assert status.structured_content is not None
        assert status.structured_content["state"] == "open"

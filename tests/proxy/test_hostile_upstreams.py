"""Upstreams that misbehave, as real child processes (``raw_upstream.py``) behind ``blobstore proxy``.

Each case has its line in docs/proxy.md ("Hostile upstreams"): what the host gets, and that the proxy goes on.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Final

import pytest

from tests.proxy.conftest import RAW_UPSTREAM, TIMEOUT, RawPeer, call, proxy_command, raw_peer, vm_hwm

MiB: Final = 1024 * 1024


async def exchange(
    peer: RawPeer, ident: Any, params: dict[str, Any]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Call a tool; every message the host receives before the answer, and the answer."""
    await peer.send({"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params})
    seen: list[dict[str, Any]] = []
    while True:
        line = await peer.next_line()
        assert line is not None, "the proxy closed"
        message = json.loads(line)
        if message.get("id") == ident and "method" not in message:
            return seen, message
        seen.append(message)


def text(answer: dict[str, Any]) -> str:
    return "\n".join(b.get("text", "") for b in answer["result"]["content"])


async def test_a_banner_before_the_first_message_is_dropped_and_the_handshake_works(data_dir: Path) -> None:
    command = proxy_command(data_dir, [*RAW_UPSTREAM, "--banner"])
    async with raw_peer(command, stderr=asyncio.subprocess.PIPE) as peer:
        hello = await peer.handshake()
        assert hello["serverInfo"]["name"] == "raw-upstream"
        assert text(await call(peer, 1, "echo", {"text": "hi"})).startswith("2 ")
        assert await peer.close() == 0
        assert peer.process.stderr is not None
        stderr = (await peer.process.stderr.read()).decode()
    assert stderr.count("the upstream sent a line that is not JSON; dropped") == 2
    assert "raw-upstream 1.0 starting" not in stderr  # what the upstream said is not echoed to the log


async def test_invalid_json_lines_are_dropped_and_the_answer_after_them_arrives(data_dir: Path) -> None:
    async with raw_peer(proxy_command(data_dir, RAW_UPSTREAM)) as peer:
        await peer.handshake()
        seen, answer = await exchange(peer, 1, {"name": "garbage"})
        assert text(answer) == "after garbage"
        assert seen == []  # neither the garbage nor the stray array reached the host
        assert await peer.close() == 0


async def test_answers_under_unknown_or_repeated_ids_never_reach_the_host(data_dir: Path) -> None:
    async with raw_peer(proxy_command(data_dir, RAW_UPSTREAM)) as peer:
        await peer.handshake()
        seen, answer = await exchange(peer, 1, {"name": "strays"})
        assert text(answer) == "first"
        after, echo = await exchange(peer, 2, {"name": "echo"})
        assert echo["result"]["content"][0]["text"].startswith("0 ")
        assert seen == after == []  # the strays and the second answer were dropped
        assert await peer.close() == 0


async def test_a_line_that_never_ends_is_cut_at_the_cap_and_the_store_still_answers(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cap = 8 * MiB
    monkeypatch.setenv("BLOBSTORE_PROXY_MAX_MESSAGE_BYTES", str(cap))
    async with raw_peer(proxy_command(data_dir, RAW_UPSTREAM)) as peer:
        await peer.handshake()
        answer = await call(peer, 1, "endless", {"megabytes": 256})
        assert answer["error"]["code"] == -32603
        assert f"over the {cap}-byte cap" in answer["error"]["message"]
        assert answer["error"]["data"] == {
            "reason": "message_refused",
            "cause": "over_cap",
            "maxMessageBytes": cap,
        }
        # The proxy's own tools do not wait on the upstream's line.
        listing = json.loads(await peer.request(2, "resources/list", {"cursor": "s:"}))
        assert listing["result"]["resources"] == []
        assert vm_hwm(peer.process.pid) < 400 * MiB  # far from the 256 MiB line it was sent, held twice


async def test_a_burst_of_progress_notifications_all_reach_the_host_with_memory_bounded(
    data_dir: Path,
) -> None:
    count = 100_000
    async with raw_peer(proxy_command(data_dir, RAW_UPSTREAM)) as peer:
        await peer.handshake()
        before = vm_hwm(peer.process.pid)
        params = {"name": "progress_burst", "arguments": {"count": count}, "_meta": {"progressToken": "p"}}
        seen, answer = await exchange(peer, 1, params)
        assert text(answer) == f"{count} sent"
        progress = [m["params"]["progress"] for m in seen if m.get("method") == "notifications/progress"]
        assert progress == list(range(1, count + 1))
        assert vm_hwm(peer.process.pid) - before < 64 * MiB
        assert await peer.close() == 0


async def test_a_call_the_upstream_never_answers_is_cancelled_upstream_and_the_read_tool_still_answers(
    data_dir: Path,
) -> None:
    async with raw_peer(proxy_command(data_dir, RAW_UPSTREAM), stderr=asyncio.subprocess.PIPE) as peer:
        await peer.handshake()
        stored = await call(peer, 1, "big", {"size": 2 * MiB, "kind": "blob"})
        uri = next(b["uri"] for b in stored["result"]["content"] if b["type"] == "resource_link")
        await peer.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "never"}})
        window = await call(peer, 3, "read_artifact", {"uri": uri, "offset": 0, "length": 16})
        assert "result" in window
        await peer.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}})
        assert peer.process.stderr is not None
        line = await asyncio.wait_for(peer.process.stderr.readline(), TIMEOUT)
        while not line.startswith(b"cancelled "):
            line = await asyncio.wait_for(peer.process.stderr.readline(), TIMEOUT)
        assert line.decode().split()[1].startswith("bp-")  # under the proxy's id, not the host's
        assert await peer.close() == 0


async def test_an_upstream_that_exits_in_the_middle_of_a_message_fails_the_call_and_the_proxy(
    data_dir: Path,
) -> None:
    async with raw_peer(proxy_command(data_dir, RAW_UPSTREAM)) as peer:
        await peer.handshake()
        answer = await call(peer, 1, "cut")
        error = answer["error"]
        assert error["code"] == -32603
        assert "is gone (exit status 4)" in error["message"]
        assert error["data"]["reason"] == "upstream_unavailable"
        assert await asyncio.wait_for(peer.process.wait(), TIMEOUT) == 1

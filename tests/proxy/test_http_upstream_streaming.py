"""A streamable-HTTP upstream's large and hostile answers through ``blobstore proxy``, read as they arrive.

The upstream is ``raw_upstream.py --http`` in a real child process, answering every request with a chunked
body of server-sent events or of JSON. A message cap (``BLOBSTORE_PROXY_MAX_MESSAGE_BYTES``) far smaller than
a message whose payload still gets through shows the proxy never held the answer whole; ``VmHWM`` of the
proxy shows a large request went out from where it was held.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, Final

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.fixtures.server import BLOBSTORE
from tests.proxy.conftest import (
    HERE,
    NAMESPACE,
    TIMEOUT,
    RawPeer,
    call,
    link_of,
    raw_peer,
    stored,
    vm_hwm,
)
from tests.proxy.raw_upstream import payload_sha256, text_sha256

MiB: Final = 1024 * 1024


@contextlib.contextmanager
def http_upstream(framing: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``raw_upstream.py --http 0 --sse|--json`` running; its URL and process."""
    process = subprocess.Popen(
        [sys.executable, str(HERE / "raw_upstream.py"), "--http", "0", f"--{framing}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("listening on "), line
        yield f"http://127.0.0.1:{int(line.split()[-1])}/mcp", process
    finally:
        process.kill()
        process.wait(timeout=TIMEOUT)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


@contextlib.asynccontextmanager
async def proxied(data_dir: Path, url: str, *, stderr: int | None = None) -> AsyncIterator[RawPeer]:
    command = [
        BLOBSTORE,
        "proxy",
        "--data-dir",
        str(data_dir),
        "--namespace",
        NAMESPACE,
        "--upstream-url",
        url,
    ]
    async with raw_peer(command, stderr=stderr) as peer:
        await peer.handshake()
        yield peer


async def calls(
    peer: RawPeer, tools: list[dict[str, Any]], *, notes: int = 0, first: int = 1
) -> tuple[dict[Any, Any], list[dict[str, Any]]]:
    """``tools/call`` with each of ``tools`` (its params) at once, ids from ``first``; the answers by id, and
    the notifications that came until every answer and at least ``notes`` of them had."""
    for ident, params in enumerate(tools, first):
        await peer.send({"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params})
    answers: dict[Any, Any] = {}
    seen: list[dict[str, Any]] = []
    while len(answers) < len(tools) or len(seen) < notes:
        line = await peer.next_line()
        assert line is not None, "the proxy closed"
        message = json.loads(line)
        if "method" in message:
            seen.append(message)
        else:
            answers[message["id"]] = message
    return answers, seen


def text_of(answer: dict[str, Any]) -> str:
    text: str = answer["result"]["content"][0]["text"]
    return text


@pytest.mark.parametrize("framing", ["sse", "json"])
async def test_a_large_image_answer_streams_into_the_store_under_a_cap_far_smaller_than_it(
    data_dir: Path, small_cap: int, framing: str
) -> None:
    size = 24 * MiB  # 32 MiB of base64 in one answer: eight times the cap
    with http_upstream(framing) as (url, _):
        async with proxied(data_dir, url) as peer:
            answer = await call(peer, 1, "big", {"size": size, "kind": "image"})
            link = link_of(answer)
            echo = await call(peer, 2, "echo", {"text": "after"})
            assert echo["result"]["content"][0]["text"].startswith("5 ")
            assert await peer.close() == 0
    (artifact,) = await stored(data_dir)
    assert artifact.uri == link["uri"]
    assert (artifact.size, artifact.sha256) == (size, payload_sha256(size))


async def test_a_large_text_event_streams_into_the_store(data_dir: Path, small_cap: int) -> None:
    size = 12 * MiB
    with http_upstream("sse") as (url, _):
        async with proxied(data_dir, url) as peer:
            answer = await call(peer, 1, "big", {"size": size, "kind": "text"})
            link_of(answer)
            assert f"of {size} bytes" in answer["result"]["content"][0]["text"]
            assert await peer.close() == 0
    (artifact,) = await stored(data_dir)
    assert (artifact.size, artifact.sha256) == (size, text_sha256(size))


@pytest.mark.parametrize("framing", ["sse", "json"])
async def test_an_answer_over_the_cap_gets_the_call_an_error_naming_it_and_later_calls_go_through(
    data_dir: Path, small_cap: int, framing: str
) -> None:
    with http_upstream(framing) as (url, _):
        async with proxied(data_dir, url) as peer:
            answer = await call(peer, 1, "big", {"size": 8 * MiB, "where": "meta"})
            assert answer["error"]["code"] == -32603
            assert f"over the {small_cap}-byte cap" in answer["error"]["message"]
            assert answer["error"]["data"]["cause"] == "over_cap"
            echo = await call(peer, 2, "echo", {"text": "still here"})
            assert echo["result"]["content"][0]["text"].startswith("10 ")
            assert await peer.close() == 0
    assert await stored(data_dir) == []


async def test_large_tool_arguments_go_out_as_a_chunked_body_without_being_held(data_dir: Path) -> None:
    argument = "0123456789abcdef" * (4 * MiB)  # 64 MiB of one string
    with http_upstream("sse") as (url, _):
        async with proxied(data_dir, url) as peer:
            await call(peer, 1, "echo", {"text": "warm"})
            before = vm_hwm(peer.process.pid)
            answer = await call(peer, 2, "echo", {"text": argument})
            size, digest = answer["result"]["content"][0]["text"].split()
            assert (int(size), digest) == (len(argument), hashlib.sha256(argument.encode()).hexdigest())
            assert vm_hwm(peer.process.pid) - before < 32 * MiB
            assert await peer.close() == 0


async def test_a_json_answer_that_is_not_json_gets_the_call_an_error(data_dir: Path) -> None:
    # Over JSON the garbage lines and the answer after them make one body: not a JSON text.
    with http_upstream("json") as (url, _):
        async with proxied(data_dir, url) as peer:
            answer = await call(peer, 1, "garbage")
            assert answer["error"]["code"] == -32603
            assert answer["error"]["data"]["cause"] == "invalid_json"
            echo = await call(peer, 2, "echo", {"text": "next"})
            assert echo["result"]["content"][0]["text"].startswith("4 ")
            assert await peer.close() == 0


async def test_events_that_are_not_json_are_dropped_and_the_answer_after_them_arrives(data_dir: Path) -> None:
    with http_upstream("sse") as (url, _):
        async with proxied(data_dir, url) as peer:
            answer = await call(peer, 1, "garbage")
            assert answer["result"]["content"][0]["text"] == "after garbage"
            assert await peer.close() == 0


async def test_a_burst_of_progress_events_all_reach_the_host_with_memory_bounded(data_dir: Path) -> None:
    count = 50_000
    with http_upstream("sse") as (url, _):
        async with proxied(data_dir, url) as peer:
            before = vm_hwm(peer.process.pid)
            params = {
                "name": "progress_burst",
                "arguments": {"count": count},
                "_meta": {"progressToken": "p"},
            }
            answers, seen = await calls(peer, [params])
            assert text_of(answers[1]) == f"{count} sent"
            assert [note["params"]["progress"] for note in seen] == list(range(1, count + 1))
            assert vm_hwm(peer.process.pid) - before < 64 * MiB
            assert await peer.close() == 0


async def test_a_call_left_open_is_cancelled_upstream_and_other_calls_go_on(data_dir: Path) -> None:
    with http_upstream("sse") as (url, process):
        async with proxied(data_dir, url) as peer:
            await peer.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "never"}})
            echo = await call(peer, 3, "echo", {"text": "meanwhile"})
            assert echo["result"]["content"][0]["text"].startswith("9 ")
            await peer.send(
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}
            )
            assert process.stderr is not None
            line = await asyncio.to_thread(process.stderr.readline)
            assert line.split()[0] == "cancelled"
            assert line.split()[1].startswith("bp-")  # under the proxy's id, not the host's
            assert await peer.close() == 0


async def test_an_upstream_that_exits_in_the_middle_of_an_answer_fails_the_call_and_the_proxy(
    data_dir: Path,
) -> None:
    with http_upstream("sse") as (url, _):
        async with proxied(data_dir, url) as peer:
            answer = await call(peer, 1, "cut")
            assert answer["error"]["code"] == -32603
            assert answer["error"]["data"]["reason"] == "upstream_unavailable"
            assert "is gone" in answer["error"]["message"]
            assert await asyncio.wait_for(peer.process.wait(), TIMEOUT) == 1


async def test_what_the_server_sends_outside_a_request_comes_on_the_get_stream_to_the_host(
    data_dir: Path,
) -> None:
    with http_upstream("sse") as (url, _):
        async with proxied(data_dir, url) as peer:
            news = [{"name": "announce", "arguments": {"text": t}} for t in ("first news", "second news")]
            answers, notes = await calls(peer, news, notes=2)
            assert [text_of(answers[1]), text_of(answers[2])] == ["announced", "announced"]
            assert [n["method"] for n in notes] == ["notifications/message"] * 2
            assert sorted(n["params"]["data"] for n in notes) == ["first news", "second news"]
            assert await peer.close() == 0


async def test_a_get_stream_the_server_ends_is_opened_again_after_its_last_event(data_dir: Path) -> None:
    with http_upstream("sse") as (url, _):
        async with proxied(data_dir, url) as peer:
            # Each note is held by the server until a GET stream takes it: before or after its answer.
            _, notes = await calls(peer, [{"name": "announce", "arguments": {"text": "one"}}], notes=1)
            hung_up, _ = await calls(peer, [{"name": "hangup"}], first=2)
            assert text_of(hung_up[2]) == "hung up"
            _, later = await calls(
                peer, [{"name": "announce", "arguments": {"text": "two"}}], notes=1, first=3
            )
            notes += later
            assert [(n["method"], n["params"]["data"]) for n in notes] == [
                ("notifications/message", "one"),
                ("notifications/message", "two"),
            ]
            # The first stream was opened fresh; the second after the first one's last event.
            assert [n["params"]["_meta"]["openedAfter"] for n in notes] == [None, "g-1"]
            assert await peer.close() == 0


async def test_an_answer_stream_the_server_closes_to_be_polled_is_resumed_with_the_last_event_id(
    data_dir: Path,
) -> None:
    with http_upstream("sse") as (url, _):
        async with proxied(data_dir, url) as peer:
            answer = await call(peer, 1, "polled")
            assert answer["result"]["content"][0]["text"] == "polled"
            assert await peer.close() == 0


async def test_an_answer_stream_that_ends_without_the_answer_gets_the_call_an_error(data_dir: Path) -> None:
    with http_upstream("sse") as (url, _):
        async with proxied(data_dir, url) as peer:
            answer = await call(peer, 1, "silent")
            assert answer["error"]["code"] == -32603
            assert "without answering it" in answer["error"]["message"]
            echo = await call(peer, 2, "echo", {"text": "next"})
            assert echo["result"]["content"][0]["text"].startswith("4 ")
            assert await peer.close() == 0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def test_an_sdk_server_that_closes_its_answer_stream_to_be_polled_answers_through_the_proxy(
    data_dir: Path,
) -> None:
    # The official SDK's server with an event store: its tool closes its stream (ctx.close_sse_stream), and
    # the answer comes only to a GET with Last-Event-ID. Driven by the official client through the proxy.
    with resumable_server() as port:
        await wait_for_port(port)
        url = f"http://127.0.0.1:{port}/mcp"
        params = StdioServerParameters(
            command=BLOBSTORE, args=["proxy", "--data-dir", str(data_dir), "--upstream-url", url]
        )
        # 2025-11-25, the first version whose servers close a stream to be polled.
        async with Client(params, mode="legacy") as client:
            result = await client.call_tool("report", {})
            assert not result.is_error, result
            assert "the report, after a reconnection" in json.dumps(result.model_dump(mode="json"))


@contextlib.contextmanager
def resumable_server() -> Iterator[int]:
    port = free_port()
    server = subprocess.Popen([sys.executable, str(HERE / "resumable_server.py"), str(port)])
    try:
        yield port
    finally:
        server.terminate()
        server.wait(timeout=TIMEOUT)


async def wait_for_port(port: int) -> None:
    for _ in range(600):
        with contextlib.suppress(OSError):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            await writer.wait_closed()
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"nothing listens on {port}")

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

from blobstore.config import Settings
from blobstore.models import Caller
from blobstore.runtime import open_service
from tests.fixtures.server import BLOBSTORE
from tests.proxy.conftest import HERE, NAMESPACE, TIMEOUT, RawPeer, raw_peer, vm_hwm
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


async def call(
    peer: RawPeer, ident: int, name: str, arguments: dict[str, Any] | None = None
) -> dict[str, Any]:
    line = await peer.request(ident, "tools/call", {"name": name, "arguments": arguments or {}})
    answer: dict[str, Any] = json.loads(line)
    return answer


async def stored(data_dir: Path) -> list[Any]:
    async with open_service(Settings(data_dir=data_dir)) as service:
        page = await service.list_artifacts(Caller(namespace=NAMESPACE), limit=100)
        return list(page.items)


def link_of(answer: dict[str, Any]) -> dict[str, Any]:
    links: list[dict[str, Any]] = [b for b in answer["result"]["content"] if b["type"] == "resource_link"]
    assert len(links) == 1, answer
    return links[0]


@pytest.fixture
def small_cap(monkeypatch: pytest.MonkeyPatch) -> int:
    cap = 4 * MiB
    monkeypatch.setenv("BLOBSTORE_PROXY_MAX_MESSAGE_BYTES", str(cap))
    return cap


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
            await peer.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
            progress: list[int] = []
            while True:
                line = await peer.next_line()
                assert line is not None
                message = json.loads(line)
                if message.get("id") == 1:
                    break
                progress.append(message["params"]["progress"])
            assert message["result"]["content"][0]["text"] == f"{count} sent"
            assert progress == list(range(1, count + 1))
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
            for ident, text in enumerate(["first news", "second news"], start=1):
                params = {"name": "announce", "arguments": {"text": text}}
                await peer.send({"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params})
            answers: dict[Any, Any] = {}
            notes: list[Any] = []
            while len(notes) < 2 or len(answers) < 2:
                line = await peer.next_line()
                assert line is not None
                message = json.loads(line)
                if "method" in message:
                    notes.append(message)
                else:
                    answers[message["id"]] = message["result"]["content"][0]["text"]
            assert answers == {1: "announced", 2: "announced"}
            assert [n["method"] for n in notes] == ["notifications/message"] * 2
            assert sorted(n["params"]["data"] for n in notes) == ["first news", "second news"]
            assert await peer.close() == 0


async def test_a_get_stream_the_server_ends_is_opened_again_after_its_last_event(data_dir: Path) -> None:
    with http_upstream("sse") as (url, _):
        async with proxied(data_dir, url) as peer:
            notes: list[dict[str, Any]] = []
            steps = [("announce", "one"), ("hangup", ""), ("announce", "two")]
            for ident, (tool, text) in enumerate(steps, 1):
                params = {"name": tool, "arguments": {"text": text}}
                await peer.send({"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params})
                answered, wanted = False, len(notes) + (tool == "announce")
                # The note is held by the server until a GET stream takes it: it may come before or after.
                while not answered or len(notes) < wanted:
                    line = await peer.next_line()
                    assert line is not None
                    message = json.loads(line)
                    if "method" in message:
                        notes.append(message)
                    else:
                        assert message["id"] == ident
                        assert "result" in message
                        answered = True
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

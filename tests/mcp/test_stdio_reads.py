"""Plain ``resources/read`` requests answered beside the SDK's dispatcher on stdio (``stdio_reads``).

Every conversation here runs twice over an in-memory line channel, once with the SDK answering everything and
once with the store's reads answered beside it, and the two must put the same bytes on the wire: results in
every handshake-era version (text, blob, empty, windows, a blob long enough to be spliced into its line),
errors, a cancelled read, a read cut off by the end of the input. The reads taken away from the SDK are
counted, so a test also fails if they never were; requests the SDK must keep answering are checked the same
way.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.server import Server
from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS
from opentelemetry import trace

from blobstore import metrics
from blobstore.config import Settings
from blobstore.models import Caller
from blobstore.runtime import open_service
from blobstore.service import ArtifactService
from mcp_resources.transports.server import create_stdio_server
from mcp_resources.transports.stdio import serve_lines
from mcp_resources.uris import window_uri
from tests.mcp.conftest import CALLER, put

KiB = 1024


@dataclass
class Channel:
    """Lines in through a memory stream, whole lines out into a list (and a stream, to wait on)."""

    incoming: Any
    receiving: Any
    sent: list[bytes] = field(default_factory=list)
    answers: Any = None
    answered: Any = None

    @classmethod
    def new(cls) -> Channel:
        send, receive = anyio.create_memory_object_stream[bytes | None](100)
        answers, answered = anyio.create_memory_object_stream[bytes](100)
        return cls(send, receive, answers=answers, answered=answered)

    async def receive(self) -> bytes | None:
        line: bytes | None = await self.receiving.receive()
        return line

    def close(self) -> None:
        for stream in (self.incoming, self.receiving, self.answers, self.answered):
            stream.close()

    async def send_parts(self, parts: list[bytes]) -> None:
        line = b"".join(parts)
        assert line.endswith(b"\n")
        assert line.count(b"\n") == 1
        self.sent.append(line)
        await self.answers.send(line)


@dataclass
class Store:
    service: ArtifactService
    ids: dict[str, str]


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    settings = Settings(data_dir=tmp_path, inline_limit=64 * KiB)
    async with open_service(settings) as service:
        blob = os.urandom(60 * KiB)  # base64 of more than 64 KiB: spliced into its line
        ids = {
            "binary": (await put(service, b"\x00\x01\xffbinary", "b.bin", "application/octet-stream")).id,
            "text": (await put(service, 'héllo \u2028 \x1f "q" text'.encode(), "t.txt", "text/plain")).id,
            "bad-utf8": (await put(service, b"\xff\xfe text?", "u.txt", "text/plain")).id,
            "empty": (await put(service, b"", "e.txt", "text/plain")).id,
            "blob": (await put(service, blob, "big.bin", "application/octet-stream")).id,
            "too-big": (await put(service, os.urandom(100 * KiB), "huge.bin", "application/octet-stream")).id,
            "foreign": (await put(service, b"not yours", "f.bin", caller=Caller(namespace="elsewhere"))).id,
        }
        yield Store(service, ids)


def request(request_id: object, method: str, params: dict[str, Any] | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode()


def notification(method: str, params: dict[str, Any] | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode()


def read(request_id: object, uri: str) -> bytes:
    return request(request_id, "resources/read", {"uri": uri})


def handshake(version: str) -> list[bytes]:
    init = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    return [request("init", "initialize", init), notification("notifications/initialized")]


def uri(artifact_id: str) -> str:
    return f"blobstore://artifacts/{artifact_id}"


def read_counts() -> tuple[float, float]:
    def value(outcome: str) -> float:
        counted: float = metrics.MCP_REQUESTS.labels("resources/read", outcome)._value.get()
        return counted

    return value("ok"), value("error")


@dataclass
class Conversation:
    sent: list[bytes]
    taken: int
    """Lines answered beside the SDK."""
    counts: tuple[float, float]
    """resources/read requests counted ok and error in the metrics."""


async def converse(
    store: Store, steps: Sequence[bytes | tuple[bytes, int]], *, beside: bool, server_hook: Any = None
) -> Conversation:
    """Send each line, waiting after it for the number of answers given with it (requests: one)."""
    server, reads = create_stdio_server(store.service, CALLER)
    if server_hook is not None:
        server_hook(server)
    taken = 0
    if beside:
        take = reads.take

        def counting(line: bytes) -> bool:
            nonlocal taken
            took = take(line)
            taken += took
            return took

        reads.take = counting  # type: ignore[method-assign]
    channel = Channel.new()
    before = read_counts()
    with anyio.fail_after(20):
        async with anyio.create_task_group() as group:
            group.start_soon(functools.partial(serve_lines, server, channel, reads=reads if beside else None))
            for step in steps:
                line, answers = step if isinstance(step, tuple) else (step, 0 if b'"id"' not in step else 1)
                channel.incoming.send_nowait(line)  # no checkpoint: lines may queue up
                for _ in range(answers):
                    await channel.answered.receive()
            channel.incoming.send_nowait(None)
    channel.close()
    after = read_counts()
    return Conversation(channel.sent, taken, (after[0] - before[0], after[1] - before[1]))


async def both(store: Store, steps: Sequence[bytes | tuple[bytes, int]], **kwargs: Any) -> Conversation:
    """The conversation with the SDK alone and with reads beside it: the same bytes on the wire."""
    alone = await converse(store, steps, beside=False, **kwargs)
    beside = await converse(store, steps, beside=True, **kwargs)
    assert beside.sent == alone.sent
    assert beside.counts == alone.counts
    assert alone.taken == 0
    return beside


@pytest.mark.parametrize("version", HANDSHAKE_PROTOCOL_VERSIONS)
async def test_reads_beside_the_sdk_put_the_sdks_bytes_on_the_wire(store: Store, version: str) -> None:
    ids = store.ids
    reads = [
        read(1, uri(ids["binary"])),
        read("two", uri(ids["text"])),
        read(3, uri(ids["bad-utf8"])),
        read(4, uri(ids["empty"])),
        read(5, uri(ids["blob"])),
        read(6, window_uri(ids["binary"], 2, 3)),
        read(7, window_uri(ids["binary"], 9, 4)),  # offset == size: an empty blob with eof
        read(8, window_uri(ids["blob"], 1000, 60 * KiB)),  # a window long enough to be spliced
        read(9, uri(ids["too-big"])),  # range_required
        read(10, window_uri(ids["binary"], 10, 4)),  # past the end
        read(11, uri(ids["binary"]) + "?offset=x"),
        read(12, uri("a_nonexistent")),
        read(13, uri(ids["foreign"])),  # another namespace's: not found, like a missing one
        read(14, "blobstore://elsewhere/x"),
        read(2**62, uri(ids["binary"])),
    ]
    conversation = await both(store, [*handshake(version), *reads])
    assert conversation.taken == len(reads)
    assert conversation.counts == (9, 6)
    answers = [json.loads(line) for line in conversation.sent[1:]]
    assert [answer["id"] for answer in answers] == [1, "two", *range(3, 15), 2**62]
    assert answers[-1]["result"]["contents"][0]["blob"] == "AAH/YmluYXJ5"


async def test_requests_the_reads_beside_do_not_take_go_to_the_sdk(store: Store) -> None:
    plain = uri(store.ids["binary"])
    early = [read(1, plain)]  # before the handshake: the SDK refuses it
    unparsed = 0  # the SDK drops a line it cannot parse as a message, unanswered
    others: list[bytes | tuple[bytes, int]] = [
        request(2, "resources/read", {"uri": plain, "_meta": {"progressToken": "p"}}),
        read(3, "file:///etc/passwd"),
        request(4, "resources/read", {"uri": plain, "extra": 1}),
        (
            json.dumps(
                {"jsonrpc": "2.0", "id": True, "method": "resources/read", "params": {"uri": plain}}
            ).encode(),
            unparsed,
        ),
        json.dumps(
            {"jsonrpc": "2.0", "id": 2**64, "method": "resources/read", "params": {"uri": plain}}
        ).encode(),
        (
            b'{"jsonrpc": "2.0", "id": 7, "method": "resources/read", "params": {"uri": "blobstore://artifacts/\\ud800"}}',
            unparsed,
        ),
        b'{"jsonrpc": "2.0", "id": 8, "method": "resources/read", "params": {"uri": "'
        + plain.encode()
        + b'\xff"}}',
        (b'{"jsonrpc": "2.0", "id": 9, "method": "resources/read", "params": {"uri": ', unparsed),
        request(10, "resources/list"),
    ]
    conversation = await both(store, [*early, *handshake("2025-11-25"), *others, read(11, plain)])
    assert conversation.taken == 1


async def test_an_initialize_in_progress_holds_reads_for_the_sdk(store: Store) -> None:
    """A read sent right behind an initialize (before its answer) waits for it in the SDK, as before."""
    init = handshake("2025-06-18")[0]
    steps: list[bytes | tuple[bytes, int]] = [(init, 0), (read(1, uri(store.ids["binary"])), 2)]
    steps += [read(2, uri(store.ids["binary"])), *handshake("2024-11-05"), read(3, uri(store.ids["text"]))]
    conversation = await both(store, steps)
    # The first read goes to the SDK when it arrives before the initialize is answered, else beside it.
    assert conversation.taken in (2, 3)


async def test_a_2026_era_connection_is_left_to_the_sdk(store: Store) -> None:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    steps = [request(1, "server/discover", {"_meta": meta}), read(2, uri(store.ids["binary"]))]
    conversation = await both(store, steps)
    assert conversation.taken == 0


async def test_with_a_tracer_provider_set_reads_stay_with_the_sdk(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: trace.NoOpTracerProvider())
    conversation = await both(store, [*handshake("2025-11-25"), read(1, uri(store.ids["binary"]))])
    assert conversation.taken == 0


async def test_a_server_with_other_middleware_keeps_every_read_in_the_sdk(store: Store) -> None:
    async def passing(ctx: Any, call_next: Any) -> Any:
        return await call_next(ctx)

    def add_layer(server: Server[Any]) -> None:
        server.middleware.append(passing)

    steps = [*handshake("2025-11-25"), read(1, uri(store.ids["binary"]))]
    conversation = await both(store, steps, server_hook=add_layer)
    assert conversation.taken == 0


@contextlib.contextmanager
def stalled_reads(service: ArtifactService) -> Any:
    """Reads that wait until released (the store's read, whichever path calls it)."""
    release = anyio.Event()
    original = service.read_range

    async def stalled(*args: Any, **kwargs: Any) -> Any:
        await release.wait()
        return await original(*args, **kwargs)

    service.read_range = stalled  # type: ignore[method-assign]
    try:
        yield release
    finally:
        service.read_range = original  # type: ignore[method-assign]


async def test_a_cancelled_read_is_left_unanswered_as_the_sdk_leaves_it(store: Store) -> None:
    plain = uri(store.ids["binary"])
    steps: list[bytes | tuple[bytes, int]] = [
        *handshake("2025-11-25"),
        (read(1, plain), 0),
        notification("notifications/cancelled", {"requestId": "1", "reason": "changed my mind"}),
        request(2, "ping"),
    ]
    with stalled_reads(store.service):
        conversation = await both(store, steps)
    assert conversation.taken == 1
    assert [json.loads(line)["id"] for line in conversation.sent] == ["init", 2]
    assert conversation.counts == (0, 1)


async def test_a_read_cut_off_by_the_end_of_the_input_is_answered_connection_closed(store: Store) -> None:
    steps: list[bytes | tuple[bytes, int]] = [*handshake("2025-11-25"), (read(1, uri(store.ids["text"])), 0)]
    with stalled_reads(store.service):
        conversation = await both(store, steps)
    assert conversation.taken == 1
    assert json.loads(conversation.sent[-1]) == {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {"code": -32000, "message": "Connection closed"},
    }

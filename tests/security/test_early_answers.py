"""An answer that comes before the end of its request's body (an upload refused half-way, on a full disk say):
the body guard reads and drops the rest first, so the client, still sending, is not reset and reads it."""

from __future__ import annotations

import anyio
from starlette.types import Message, Receive, Scope, Send

from blobstore.api.guard import BodyGuard
from blobstore.errors import RequestTimeout
from tests.fixtures.asgi import http_scope

TIMEOUT = 0.2


async def refuse_at_once(scope: Scope, receive: Receive, send: Send) -> None:
    await receive()  # the first piece only, as a write that fails on its first batch
    await send({"type": "http.response.start", "status": 507, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"full"})


def sized_post(length: int) -> Scope:
    return http_scope("POST", "/v1/artifacts", headers=[(b"content-length", str(length).encode())])


async def test_the_rest_of_the_body_is_read_before_an_early_answer_goes_out() -> None:
    pieces = [b"a" * 100, b"b" * 100, b"c" * 100]
    consumed: list[bytes] = []
    sent: list[tuple[int, Message]] = []

    async def receive() -> Message:
        piece = pieces.pop(0)
        consumed.append(piece)
        return {"type": "http.request", "body": piece, "more_body": bool(pieces)}

    async def send(message: Message) -> None:
        sent.append((len(consumed), message))

    await BodyGuard(refuse_at_once, timeout=TIMEOUT, max_body=1000)(sized_post(300), receive, send)

    (read_before_start, start), (_, body) = sent
    assert (start["type"], start["status"], read_before_start) == ("http.response.start", 507, 3)
    assert (b"connection", b"close") not in start["headers"]
    assert body["body"] == b"full"


async def test_a_body_that_stops_coming_gets_the_early_answer_with_the_connection_closed() -> None:
    first = True
    sent: list[Message] = []

    async def receive() -> Message:
        nonlocal first
        if first:
            first = False
            return {"type": "http.request", "body": b"x" * 100, "more_body": True}
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def send(message: Message) -> None:
        sent.append(message)

    await BodyGuard(refuse_at_once, timeout=TIMEOUT, max_body=1000)(sized_post(1000), receive, send)

    assert sent[0]["status"] == 507
    assert (b"connection", b"close") in sent[0]["headers"]


async def test_a_request_without_a_body_is_answered_without_a_read() -> None:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    async def receive() -> Message:
        raise AssertionError("a request without a body is not read")

    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    await BodyGuard(app, timeout=TIMEOUT, max_body=1000)(http_scope("GET", "/v1/artifacts"), receive, send)
    assert sent[0]["status"] == 200


async def test_a_body_the_guard_refused_itself_is_answered_without_reading_more() -> None:
    calls = 0

    async def receive() -> Message:
        nonlocal calls
        calls += 1
        if calls == 1:
            return {"type": "http.request", "body": b"x" * 100, "more_body": True}
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        try:
            while True:
                await receive()
        except RequestTimeout:
            await send({"type": "http.response.start", "status": 408, "headers": []})
            await send({"type": "http.response.body", "body": b"slow"})

    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    await BodyGuard(app, timeout=TIMEOUT, max_body=1000)(sized_post(1000), receive, send)

    assert (sent[0]["status"], calls) == (408, 2)
    assert sent[0]["headers"] == []

"""A request body ends at its ``Content-Length``: the message that brings its last declared byte is the last
one the app waits for.

granian sends a body's last bytes with ``more_body`` still set and the end of the body as one more, empty
message. On a stop it can drop that message, and a request that had its whole body waited in ``receive``
until the stop's grace ran out and it was cancelled. RFC 9112, section 6.3: "If a valid Content-Length header
field is present without Transfer-Encoding, its decimal value defines the expected message body length in
octets."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from starlette.types import Message, Receive, Scope, Send

from blobstore.api import create_app
from blobstore.api.guard import BodyGuard
from tests.fixtures.asgi import http_scope
from tests.fixtures.settings import make_settings


class ThenNothing:
    """``pieces`` as body messages, each with ``more_body`` set, then no message ever (a server that dropped
    the end of the body)."""

    def __init__(self, *pieces: bytes) -> None:
        self.pieces = list(pieces)
        self.calls = 0

    async def __call__(self) -> Message:
        self.calls += 1
        if self.pieces:
            return {"type": "http.request", "body": self.pieces.pop(0), "more_body": True}
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


async def read_through_guard(scope: Scope, receive: Receive) -> list[tuple[bytes, bool]]:
    read: list[tuple[bytes, bool]] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            read.append((message.get("body", b""), message.get("more_body", False)))
            if not message.get("more_body", False):
                return

    async def send(message: Message) -> None:
        raise AssertionError("nothing is sent")

    with anyio.fail_after(10):  # a guard against hanging the suite, not a measurement
        await BodyGuard(app, timeout=30, max_body=10**6)(scope, receive, send)
    return read


async def test_the_message_with_the_last_declared_byte_ends_the_body() -> None:
    receive = ThenNothing(b"abc", b"defg", b"hi")
    scope = http_scope("POST", "/x", headers=[(b"content-length", b"9")])
    read = await read_through_guard(scope, receive)
    assert read == [(b"abc", True), (b"defg", True), (b"hi", False)]
    assert receive.calls == 3


@pytest.mark.parametrize(
    "framing",
    [(b"content-length", b"4"), (b"transfer-encoding", b"chunked")],
    ids=["short-of-its-length", "chunked"],
)
async def test_a_body_its_length_does_not_end_is_still_waited_for(framing: tuple[bytes, bytes]) -> None:
    """Without its last message, a body short of its length or a chunked one is waited for: the stall
    timeout decides (tests/security/test_timeouts.py)."""
    receive = ThenNothing(b"abc")
    with anyio.move_on_after(0.3) as waited:
        await read_through_guard(http_scope("POST", "/x", headers=[framing]), receive)
    assert waited.cancelled_caught
    assert receive.calls == 2


async def test_an_upload_whose_end_of_body_never_comes_is_stored(tmp_path: Path) -> None:
    body = b"every declared byte arrived"
    app = create_app(make_settings(tmp_path))
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    scope = http_scope("POST", "/v1/artifacts", b"name=whole.bin", [(b"content-length", b"%d" % len(body))])
    async with app.router.lifespan_context(app):
        with anyio.fail_after(10):  # a guard against hanging the suite, not a measurement
            await app(scope, ThenNothing(body), send)
    assert sent[0]["status"] == 201
    assert json.loads(sent[1]["body"])["size"] == len(body)

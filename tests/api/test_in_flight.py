"""The lifespan's shutdown lets the requests in flight end before it closes the store
(``blobstore.api.in_flight``): a request still receiving its body when the stop begins is answered, one that
outlasts the grace is cancelled and waited for, and after the store closed a request gets ``503`` without
touching it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from starlette.types import Message, Scope

from blobstore.api import create_app
from blobstore.api.in_flight import InFlight
from tests.fixtures.asgi import http_scope
from tests.fixtures.settings import make_settings


class SlowUpload:
    """One ``POST /v1/artifacts`` driven over ASGI, its body held back until :meth:`release`."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.released = asyncio.Event()
        self.sent: list[Message] = []
        self.received = asyncio.Event()

    async def receive(self) -> Message:
        self.received.set()
        await self.released.wait()
        return {"type": "http.request", "body": self.body, "more_body": False}

    async def send(self, message: Message) -> None:
        self.sent.append(message)

    def release(self) -> None:
        self.released.set()

    @property
    def status(self) -> int | None:
        return next((m["status"] for m in self.sent if m["type"] == "http.response.start"), None)

    def json(self) -> Any:
        return json.loads(
            b"".join(m.get("body", b"") for m in self.sent if m["type"] == "http.response.body")
        )


def upload_scope(body: bytes) -> Scope:
    return http_scope("POST", "/v1/artifacts", b"name=slow.bin", [(b"content-length", b"%d" % len(body))])


async def test_a_request_in_flight_at_the_stop_is_answered_before_the_store_closes(tmp_path: Path) -> None:
    app = create_app(make_settings(tmp_path, shutdown_grace_seconds=30))
    upload = SlowUpload(b"held back until the stop began")
    lifespan = app.router.lifespan_context(app)
    await lifespan.__aenter__()
    request = asyncio.create_task(app(upload_scope(upload.body), upload.receive, upload.send))
    await upload.received.wait()

    stopping = asyncio.create_task(lifespan.__aexit__(None, None, None))
    await asyncio.sleep(0.2)
    assert not stopping.done(), "the store closed under a request in flight"
    assert hasattr(app.state, "blobstore")
    upload.release()
    await asyncio.wait_for(stopping, 30)

    assert request.done()
    assert request.exception() is None
    assert upload.status == 201
    assert upload.json()["size"] == len(upload.body)
    assert not hasattr(app.state, "blobstore")


async def test_a_request_that_outlasts_the_grace_is_cancelled_and_waited_for(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    app = create_app(make_settings(tmp_path, shutdown_grace_seconds=0.3))
    upload = SlowUpload(b"never sent")
    async with app.router.lifespan_context(app):
        request = asyncio.create_task(app(upload_scope(upload.body), upload.receive, upload.send))
        await upload.received.wait()
        started = asyncio.get_running_loop().time()
    # The lifespan returned only once the request had ended, and not before the grace.
    assert asyncio.get_running_loop().time() - started >= 0.3
    assert request.done()
    # It ends without raising into the server, which would log the cancellation as the app's failure (with a
    # traceback); the app's own line names the request instead.
    assert not request.cancelled()
    assert request.exception() is None
    assert upload.status is None
    assert not hasattr(app.state, "blobstore")
    cancelled = [r.getMessage() for r in caplog.records if "cancelled after the grace" in r.getMessage()]
    assert cancelled == ["stopping: POST /v1/artifacts was cancelled after the grace"]


async def test_after_the_stop_a_request_gets_503_without_the_store(tmp_path: Path) -> None:
    app = create_app(make_settings(tmp_path, shutdown_grace_seconds=1))
    async with app.router.lifespan_context(app):
        pass
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    await app(http_scope("GET", "/v1/artifacts"), receive, send)
    assert sent[0]["status"] == 503
    assert (b"retry-after", b"1") in sent[0]["headers"]
    problem = json.loads(sent[1]["body"])
    assert problem["code"] == "storage_unavailable"
    assert problem["title"] == "the server is stopping"


async def test_drain_waits_for_a_request_that_arrives_while_it_waits() -> None:
    in_flight = InFlight()
    order: list[str] = []
    arrived = asyncio.Event()

    async def request(name: str, seconds: float) -> None:
        task = in_flight.enter()
        try:
            arrived.set()
            await asyncio.sleep(seconds)
            order.append(name)
        finally:
            in_flight.leave(task)

    first = asyncio.create_task(request("first", 0.05))
    await arrived.wait()
    draining = asyncio.create_task(in_flight.drain(10))
    await asyncio.sleep(0.01)
    second = asyncio.create_task(request("second", 0.2))
    await asyncio.wait_for(draining, 10)
    assert order == ["first", "second"]
    assert first.done()
    assert second.done()
    assert in_flight.closed
    assert len(in_flight) == 0


async def test_a_cancelled_request_is_waited_for_until_its_shielded_commit_ends() -> None:
    in_flight = InFlight()
    committed: list[bool] = []
    entered = asyncio.Event()

    async def request() -> None:
        task = in_flight.enter()
        try:
            entered.set()
            with anyio.CancelScope(shield=True):  # as the group commit shields its transaction
                await asyncio.sleep(0.3)
                committed.append(True)
            await asyncio.sleep(60)
        finally:
            in_flight.leave(task)

    running = asyncio.create_task(request())
    await entered.wait()
    await asyncio.wait_for(in_flight.drain(0.05), 10)
    assert committed == [True]
    assert running.cancelled()


def test_outside_an_event_loop_nothing_is_counted() -> None:
    in_flight = InFlight()
    assert in_flight.enter() is None
    in_flight.leave(None)
    assert len(in_flight) == 0


async def test_with_no_grace_and_nothing_in_flight_the_drain_closes_at_once() -> None:
    in_flight = InFlight()
    await asyncio.wait_for(in_flight.drain(0), 1)
    assert in_flight.closed

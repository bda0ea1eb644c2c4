"""Stalled request bodies end with 408 ``request_timeout`` and hold nothing: the staged temp file is gone and
no chunk or artifact is recorded. Once a body is complete the guard no longer times anything. The minimum body
rate cuts a trickle and spares a steady stream (real sockets: ``test_trickle.py``)."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import uvloop
from fastapi import FastAPI
from hypothesis import given
from hypothesis import strategies as st
from starlette.types import Message, Receive, Scope, Send

from blobstore.api import create_app
from blobstore.api.guard import BodyGuard, MinimumRate
from blobstore.errors import RequestTimeout
from blobstore.models import Caller
from blobstore.runtime import open_service
from blobstore.service import ArtifactService
from mcp_resources.transports.http import McpHttpExtension
from tests.fixtures.asgi import http_scope
from tests.fixtures.settings import make_settings
from tests.security.conftest import running

TIMEOUT = 0.2


@pytest.fixture
async def stalling(tmp_path: Path) -> AsyncIterator[tuple[FastAPI, ArtifactService, Path]]:
    root = tmp_path / "blobs"
    settings = make_settings(tmp_path, storage_url=root.as_uri(), body_timeout_seconds=TIMEOUT)
    async with open_service(settings) as service:
        app = create_app(settings, service=service, extensions=[McpHttpExtension(settings)])
        async with running(app):
            yield app, service, root


async def call_stalling(app: Any, scope: Scope, first: bytes) -> tuple[int, dict[str, Any]]:
    """Send ``first`` as the start of the body, then nothing at all."""
    sent: list[Message] = []
    delivered = False

    async def receive() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": first, "more_body": True}
        # The behaviour under test: a body that stalls after its first bytes.
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], json.loads(body) if body else {}


async def test_a_stalled_single_upload_is_408_and_leaves_nothing(
    stalling: tuple[FastAPI, ArtifactService, Path],
) -> None:
    app, service, root = stalling
    scope = http_scope("POST", "/v1/artifacts", b"name=slow.bin", [(b"content-length", b"100000")])
    status, body = await call_stalling(app, scope, b"s" * 5000)
    assert (status, body["code"]) == (408, "request_timeout")
    assert list((root / "tmp").iterdir()) == []
    assert [o async for o in service.blobs.iter_objects()] == []
    assert (await service.list_artifacts(Caller(namespace="default"))).items == []


async def test_a_stalled_chunk_is_408_not_recorded_and_the_upload_goes_on(
    stalling: tuple[FastAPI, ArtifactService, Path],
) -> None:
    app, service, root = stalling
    caller = Caller(namespace="default")
    session = await service.uploads.begin(caller, name="c.bin", chunk_size=1024, size=1024)
    scope = http_scope("PUT", f"/v1/uploads/{session.id}/chunks/0", headers=[(b"content-length", b"1024")])
    status, body = await call_stalling(app, scope, b"c" * 100)
    assert (status, body["code"]) == (408, "request_timeout")
    assert list((root / "tmp").iterdir()) == []
    assert (await service.uploads.status(caller, session.id)).chunks == []

    async def whole() -> AsyncIterator[bytes]:
        yield b"c" * 1024

    await service.uploads.put_chunk(caller, session.id, 0, whole())
    assert (await service.uploads.complete(caller, session.id)).size == 1024


async def test_a_stalled_mcp_request_does_not_hang_or_fail_with_5xx(
    stalling: tuple[FastAPI, ArtifactService, Path],
) -> None:
    app, _service, _root = stalling
    scope = http_scope(
        "POST",
        "/mcp",
        headers=[
            (b"content-type", b"application/json"),
            (b"accept", b"application/json, text/event-stream"),
            (b"content-length", b"5000"),
        ],
    )
    with anyio.fail_after(30):  # a guard against hanging the suite, not a measurement
        status, _body = await call_stalling(app, scope, b'{"jsonrpc": "2.0", ')
    assert 400 <= status < 500


async def test_after_a_complete_body_receive_is_no_longer_timed() -> None:
    """A streaming response waits on ``receive`` for the disconnect far longer than any body timeout."""
    seen: list[str] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append((await receive())["type"])
        seen.append((await receive())["type"])

    messages = [{"type": "http.request", "body": b"done", "more_body": False}]

    async def receive() -> Message:
        if messages:
            return messages.pop()
        # The behaviour under test: a disconnect that comes long after the body timeout would have fired.
        await anyio.sleep(TIMEOUT * 3)
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        raise AssertionError("nothing is sent")

    await BodyGuard(app, timeout=TIMEOUT, max_body=100)(http_scope("POST", "/x"), receive, send)
    assert seen == ["http.request", "http.disconnect"]


async def body_through_guard(
    gaps: list[float | None], *, stall: bool = False, after: float = 0, stall_timeout: float = TIMEOUT
) -> tuple[list[bytes], BaseException | None, int]:
    """Drive a bare app through the guard: one body piece after each gap (seconds; None: already waiting, no
    wait at all), then the end of the body or, with ``stall``, nothing. What the app read, the error it met,
    and the task's pending cancellations once the app had slept ``after`` seconds more."""
    read: list[bytes] = []
    met: list[BaseException] = []
    pending: list[int] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        try:
            while True:
                message = await receive()
                read.append(message.get("body", b""))
                if not message.get("more_body", False):
                    break
        except RequestTimeout as exc:
            met.append(exc)
        await anyio.sleep(after)  # a timeout must not leave a cancellation behind for what follows
        task = asyncio.current_task()
        assert task is not None
        pending.append(task.cancelling())

    pieces = iter(gaps)

    async def receive() -> Message:
        gap = next(pieces, math.inf)
        if gap == math.inf:
            if stall:
                await anyio.sleep_forever()
            return {"type": "http.request", "body": b"", "more_body": False}
        if gap is not None:
            await anyio.sleep(gap)  # the behaviour under test: the client's pace
        return {"type": "http.request", "body": b"x", "more_body": True}

    async def send(message: Message) -> None:
        pass

    guard = BodyGuard(app, timeout=stall_timeout, max_body=10**6)
    with anyio.fail_after(30):  # a guard against hanging the suite, not a measurement
        await guard(http_scope("POST", "/x", headers=[(b"content-length", b"1000")]), receive, send)
    return read, (met[0] if met else None), pending[0]


async def test_pieces_each_within_the_timeout_are_never_cut_however_long_the_body_takes() -> None:
    # Seven waits of 0.6 of the timeout: the body takes four timeouts in all, every wait within its own.
    read, met, pending = await body_through_guard([TIMEOUT * 0.6] * 7)
    assert met is None
    assert read == [b"x"] * 7 + [b""]
    assert pending == 0


async def test_a_stall_after_many_quick_pieces_is_cut_at_the_timeout_and_leaves_no_cancellation() -> None:
    started = anyio.current_time()
    read, met, pending = await body_through_guard([0] * 200 + [TIMEOUT * 0.5] * 3, stall=True, after=0.05)
    waited = anyio.current_time() - started
    assert isinstance(met, RequestTimeout)
    assert read == [b"x"] * 203
    assert pending == 0  # the app went on sleeping after the timeout: nothing cancelled it again
    assert waited >= TIMEOUT * 1.5 + TIMEOUT


async def test_a_cancellation_from_outside_stays_a_cancellation_not_a_timeout() -> None:
    met: list[BaseException] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        try:
            while True:
                await receive()
        except BaseException as exc:
            met.append(exc)
            raise

    async def receive() -> Message:
        await anyio.sleep(TIMEOUT / 4)
        return {"type": "http.request", "body": b"x", "more_body": True}

    async def send(message: Message) -> None:
        pass

    guard = BodyGuard(app, timeout=TIMEOUT, max_body=10**6)
    with anyio.move_on_after(TIMEOUT * 2) as outer:
        await guard(http_scope("POST", "/x", headers=[(b"content-length", b"1000")]), receive, send)
    assert outer.cancelled_caught
    assert len(met) == 1
    assert not isinstance(met[0], RequestTimeout)


LOOPS = {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_a_deadline_under_a_millisecond_is_kept_on_every_event_loop(loop: str) -> None:
    """uvloop schedules a callback due in under half a millisecond as a plain handle, with no ``when()``:
    a stall timeout that short, the rate's allowance run out, or the timer moving itself to a deadline just
    ahead. Pieces already waiting are read at once; the first wait past the deadline is cut, and the task is
    left with no cancellation (``blobstore serve`` runs on uvloop under granian and uvicorn)."""
    with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
        body = body_through_guard([None] * 5, stall=True, after=0.01, stall_timeout=0.0001)
        read, met, pending = runner.run(body)
    assert read == [b"x"] * 5
    assert isinstance(met, RequestTimeout)
    assert pending == 0


# -- the minimum rate, sans I/O: ``waited`` is the time spent waiting for the client ------------------------


def steady_gaps(rate: MinimumRate, piece: int, gap: float, count: int) -> list[float]:
    """Feed ``count`` pieces, one every ``gap`` seconds of waiting; the allowance seen before each one."""
    seen = []
    for _ in range(count):
        seen.append(rate.allowance())
        rate.waited += gap
        rate.record(piece)
    return seen


def trickle_until_cut(rate: MinimumRate, piece: int, gap: float, most: int) -> float:
    """Feed a piece every ``gap`` seconds until the allowance is no longer than the gap (at most ``most``
    pieces); that last allowance."""
    for _ in range(most):
        allowance = rate.allowance()
        if allowance <= gap:
            return allowance
        rate.waited += gap
        rate.record(piece)
    raise AssertionError("never cut")


@given(
    min_rate=st.integers(1, 10**7),
    window=st.floats(0.5, 120),
    factor=st.floats(2.2, 50),
    gap_share=st.floats(0.002, 0.5),
)
def test_a_steady_body_at_twice_the_minimum_rate_is_never_cut(
    min_rate: int, window: float, factor: float, gap_share: float
) -> None:
    gap = window * gap_share
    piece = math.ceil(min_rate * factor * gap)
    count = int(2 * window / gap) + 2
    allowances = steady_gaps(MinimumRate(min_rate, window), piece, gap, count)
    assert all(allowance > gap for allowance in allowances)


@given(min_rate=st.integers(1, 10**6), window=st.floats(0.5, 120), gap_share=st.floats(0.002, 1))
def test_a_trickle_at_half_the_minimum_rate_is_cut_within_the_first_window(
    min_rate: int, window: float, gap_share: float
) -> None:
    gap = max(window * gap_share, 2 / min_rate)
    piece = max(1, math.floor(min_rate * gap / 2))
    rate = MinimumRate(min_rate, window)
    allowance = trickle_until_cut(rate, piece, gap, 1000)
    assert rate.waited + allowance <= window


@given(
    min_rate=st.integers(1, 10**6),
    window=st.floats(0.5, 120),
    burst_share=st.floats(0.01, 1),
    gap_share=st.floats(0.0005, 0.05),
)
def test_a_fast_start_buys_no_more_than_one_window_of_trickling(
    min_rate: int, window: float, burst_share: float, gap_share: float
) -> None:
    """Bytes count for one window only: a burst (up to a thousand windows' worth) followed by a trickle of
    tiny, frequent pieces is cut once the burst has left the window."""
    rate = MinimumRate(min_rate, window)
    rate.waited = window * burst_share
    rate.record(1000 * math.ceil(min_rate * window))
    burst_at = rate.waited
    gap = window * gap_share
    piece = 1 if min_rate * gap < 2 else math.floor(min_rate * gap / 2)
    gap = max(gap, 2 * piece / min_rate)  # at most half the rate
    allowance = trickle_until_cut(rate, piece, gap, 5000)
    assert rate.waited + allowance <= max(burst_at, 0) + window + window / 16 + gap


def test_a_rate_of_zero_never_cuts() -> None:
    assert MinimumRate(0, 30).allowance() == math.inf

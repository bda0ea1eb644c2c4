"""Interrupted PATCHes keep what arrived; a newer PATCH preempts one whose client went quiet."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence

import anyio
import httpx
import pytest
from fastapi import FastAPI
from starlette.types import Message, Scope

from blobstore.api import create_app
from blobstore.api.deps import app_state
from blobstore.config import Settings
from blobstore.models import Caller
from blobstore.runtime import open_service
from tests.fixtures.asgi import http_scope
from tests.tus.conftest import OFFSET_STREAM, TUS, KiB, MiB, create, head, patch

DATA = os.urandom(4 * MiB + 17)
PIECE = 300 * KiB


@pytest.fixture
async def app(settings: Settings) -> AsyncIterator[FastAPI]:
    # A long body timeout: a preemption that did not happen would show as a hang, not as a pass.
    patient = settings.model_copy(update={"body_timeout_seconds": 3600.0})
    async with open_service(patient, server=False) as service:
        built = create_app(patient, service=service)
        async with built.router.lifespan_context(built):
            yield built


@pytest.fixture
async def http(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
    ) as client:
        yield client


def patch_scope(path: str, offset: int, length: int) -> Scope:
    headers = {
        **TUS,
        "Content-Type": OFFSET_STREAM,
        "Upload-Offset": str(offset),
        "Content-Length": str(length),
    }
    return http_scope("PATCH", path, headers=[(k.lower().encode(), v.encode()) for k, v in headers.items()])


class RawRequest:
    """Drives the app at the ASGI level: sends ``pieces``, then disconnects or goes quiet."""

    def __init__(self, pieces: Sequence[bytes], *, then: str) -> None:
        self.pieces = list(pieces)
        self.then = then
        self.sent: list[Message] = []
        self.waiting = anyio.Event()

    async def receive(self) -> Message:
        if self.pieces:
            return {"type": "http.request", "body": self.pieces.pop(0), "more_body": True}
        if self.then == "disconnect":
            return {"type": "http.disconnect"}
        self.waiting.set()
        # The behaviour under test: a client that stalls mid-body and sends nothing more.
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def send(self, message: Message) -> None:
        self.sent.append(message)

    @property
    def status(self) -> int:
        status: int = self.sent[0]["status"]
        return status


def pieces(start: int, count: int) -> list[bytes]:
    return [DATA[start + i * PIECE : start + (i + 1) * PIECE] for i in range(count)]


async def test_a_disconnected_patch_keeps_full_chunks_and_the_tail_it_read(
    app: FastAPI, http: httpx.AsyncClient
) -> None:
    location = await create(http, len(DATA))
    request = RawRequest(pieces(0, 5), then="disconnect")  # 1500 KiB, then the client is gone

    await app(patch_scope(location, 0, len(DATA)), request.receive, request.send)

    assert (await head(http, location)).headers["upload-offset"] == str(5 * PIECE)
    await assert_the_rest_completes(http, location, 5 * PIECE)


async def assert_the_rest_completes(http: httpx.AsyncClient, location: str, offset: int) -> None:
    """A PATCH of the bytes from ``offset`` completes the upload with every byte of DATA."""
    rest = await patch(http, location, offset, DATA[offset:])
    assert rest.status_code == 204, rest.text
    artifact_id = rest.headers["blobstore-artifact-id"]
    assert (await http.get(f"/v1/artifacts/{artifact_id}/content")).content == DATA


async def test_a_disconnect_during_a_checksummed_patch_keeps_nothing(
    app: FastAPI, http: httpx.AsyncClient
) -> None:
    location = await create(http, len(DATA))
    request = RawRequest(pieces(0, 5), then="disconnect")
    scope = patch_scope(location, 0, len(DATA))
    scope["headers"].append((b"upload-checksum", b"sha1 " + b"A" * 27 + b"="))

    await app(scope, request.receive, request.send)

    assert (await head(http, location)).headers["upload-offset"] == "0"


async def test_a_newer_patch_preempts_a_stalled_one_which_keeps_its_bytes(
    app: FastAPI, http: httpx.AsyncClient
) -> None:
    location = await create(http, len(DATA))
    stalled = RawRequest(pieces(0, 4), then="stall")  # 1200 KiB: one staged chunk and a tail

    async with anyio.create_task_group() as group:
        group.start_soon(app, patch_scope(location, 0, len(DATA)), stalled.receive, stalled.send)
        await stalled.waiting.wait()
        # The client reconnected without having seen an offset: its retry from 0 takes the upload over.
        retry = await patch(http, location, 0, DATA)

    assert stalled.status == 409
    assert retry.status_code == 409
    assert retry.headers["upload-offset"] == str(4 * PIECE)
    await assert_the_rest_completes(http, location, 4 * PIECE)


async def test_head_completes_an_upload_whose_last_bytes_arrived_without_completion(
    app: FastAPI, http: httpx.AsyncClient
) -> None:
    location = await create(http, 10)
    assert (await patch(http, location, 0, b"01234")).status_code == 204
    # The final PATCH staged the last chunk, then the server died before completing.
    service = app_state(app).service
    await service.uploads.put_chunk(
        Caller(namespace="default"), location.rsplit("/", 1)[1], 0, once(b"0123456789")
    )

    response = await head(http, location)

    assert response.headers["upload-offset"] == "10"
    artifact_id = response.headers["blobstore-artifact-id"]
    assert (await http.get(f"/v1/artifacts/{artifact_id}/content")).content == b"0123456789"


async def once(data: bytes) -> AsyncIterator[bytes]:
    yield data

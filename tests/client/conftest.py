"""The client against a real app and service (memory storage, SQLite in ``tmp_path``) driven in-process.

Requests pass through :class:`FaultyTransport`, which records them and injects network faults on demand.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from blobstore.api.deps import app_state
from blobstore.client import AsyncBlobstoreClient, RetryPolicy, UploadStateStore
from blobstore.service import ArtifactService
from tests.client.faults import FaultyTransport
from tests.fixtures.asgi import running_app
from tests.fixtures.settings import SMALL_LIMITS, make_settings

CHUNK = SMALL_LIMITS["default_chunk_size"]
FAST_RETRY = RetryPolicy(attempts=3, base_delay=0.0, max_delay=0.0)


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[FastAPI]:
    async with running_app(make_settings(tmp_path)) as application:
        yield application


@pytest.fixture
def service(app: FastAPI) -> ArtifactService:
    return app_state(app).service


@pytest.fixture
def transport(app: FastAPI) -> FaultyTransport:
    return FaultyTransport(httpx.ASGITransport(app=app))


@pytest.fixture
def state_store(tmp_path: Path) -> UploadStateStore:
    return UploadStateStore(tmp_path / "cache" / "uploads")


ClientFactory = Callable[..., AsyncBlobstoreClient]


@pytest.fixture
def make_client(transport: FaultyTransport, state_store: UploadStateStore) -> ClientFactory:
    def make(**options: Any) -> AsyncBlobstoreClient:
        values: dict[str, Any] = {"transport": transport, "state_store": state_store, "retry": FAST_RETRY}
        values.update(options)
        return AsyncBlobstoreClient("http://127.0.0.1", **values)

    return make


@pytest.fixture
async def client(make_client: ClientFactory) -> AsyncIterator[AsyncBlobstoreClient]:
    async with make_client() as opened:
        yield opened


def write_random(path: Path, size: int) -> bytes:
    data = os.urandom(size)
    path.write_bytes(data)
    return data

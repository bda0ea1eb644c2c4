"""A tus-speaking app over a real service (memory storage, SQLite in ``tmp_path``), driven in-process, and a
real ``blobstore serve`` process for the off-the-shelf clients."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from blobstore.config import Settings
from tests.api.conftest import client, service
from tests.fixtures.server import Server, serving

__all__ = ["client", "service"]  # the HTTP API's in-process fixtures, over the settings defined here

TUS = {"Tus-Resumable": "1.0.0"}
OFFSET_STREAM = "application/offset+octet-stream"
KiB = 1024
MiB = 1024 * KiB


def metadata(**pairs: str) -> str:
    return ",".join(f"{key} {base64.b64encode(value.encode()).decode()}" for key, value in pairs.items())


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(
        data_dir=tmp_path / "data",
        storage_url="memory://",
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'metadata.sqlite3'}",
        auth_cache_seconds=0,
    )


async def create(client: httpx.AsyncClient, length: int, **headers: Any) -> str:
    """POST a new tus upload of ``length`` bytes; returns its path (the Location)."""
    response = await client.post("/tus/", headers={**TUS, "Upload-Length": str(length), **headers})
    assert response.status_code == 201, response.text
    location: str = response.headers["location"]
    return location


async def patch(
    client: httpx.AsyncClient, location: str, offset: int, data: bytes, **headers: str
) -> httpx.Response:
    return await client.patch(
        location,
        content=data,
        headers={**TUS, "Content-Type": OFFSET_STREAM, "Upload-Offset": str(offset), **headers},
    )


async def head(client: httpx.AsyncClient, location: str, **headers: str) -> httpx.Response:
    return await client.head(location, headers={**TUS, **headers})


@pytest.fixture(scope="session")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serving(tmp_path_factory.mktemp("tus-server")) as running:
        yield running

"""An app over a real service (memory storage, SQLite in ``tmp_path``), driven in-process."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from blobstore.api import create_app
from blobstore.config import Settings
from blobstore.runtime import open_service
from blobstore.service import ArtifactService
from tests.fixtures.asgi import app_client
from tests.fixtures.settings import make_settings


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path)


@pytest.fixture
async def service(settings: Settings) -> AsyncIterator[ArtifactService]:
    async with open_service(settings, server=False) as opened:
        yield opened


@pytest.fixture
async def client(settings: Settings, service: ArtifactService) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings, service=service)
    async with app_client(app) as http:
        yield http


Uploader = Callable[..., Awaitable[dict[str, Any]]]


@pytest.fixture
def upload(client: httpx.AsyncClient) -> Uploader:
    """Store bytes as an artifact through the raw-body endpoint; returns the artifact JSON."""

    async def store(data: bytes, name: str = "blob.bin", **params: Any) -> dict[str, Any]:
        response = await client.post("/v1/artifacts", params={"name": name, **params}, content=data)
        assert response.status_code == 201, response.text
        body: dict[str, Any] = response.json()
        return body

    return store

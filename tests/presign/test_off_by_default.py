"""With the presign settings off (the default), S3 downloads and chunked uploads are what they always were."""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from blobstore.api import create_app
from blobstore.config import Settings
from tests.fixtures.asgi import app_client
from tests.presign.conftest import MiB, S3Place, presign_settings

pytestmark = pytest.mark.s3


@pytest.fixture
def settings(tmp_path: Path, s3_place: S3Place) -> Settings:
    return presign_settings(tmp_path, s3_place, s3_presign_downloads=False, s3_presign_uploads=False)


@pytest.fixture
async def plain_api(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings)
    async with app_client(app) as http:
        yield http


def test_the_settings_are_off_by_default() -> None:
    defaults = Settings()
    assert not defaults.s3_presign_downloads
    assert not defaults.s3_presign_uploads


async def test_downloads_are_served_by_the_api_when_presigning_is_off(plain_api: httpx.AsyncClient) -> None:
    data = os.urandom(MiB)
    created = await plain_api.post("/v1/artifacts", params={"name": "a.bin"}, content=data)
    response = await plain_api.get(f"/v1/artifacts/{created.json()['id']}/content")
    assert response.status_code == 200
    assert response.content == data


async def test_a_direct_request_gets_a_chunked_upload_when_presigning_is_off(
    plain_api: httpx.AsyncClient,
) -> None:
    data = os.urandom(1000)
    begun = await plain_api.post(
        "/v1/uploads",
        json={"name": "a.bin", "size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "direct": True},
    )
    assert begun.status_code == 201
    body = begun.json()
    assert body["direct"] is False
    assert body["direct_parts"] is None
    assert body["direct_offered"] is False  # a client need not hash its file before it begins
    upload_id = body["upload_id"]
    parts = await plain_api.post(f"/v1/uploads/{upload_id}/parts")
    assert parts.status_code == 409
    assert parts.json()["code"] == "conflict"
    assert (await plain_api.put(f"/v1/uploads/{upload_id}/chunks/0", content=data)).status_code == 200
    assert (await plain_api.post(f"/v1/uploads/{upload_id}/complete")).status_code == 201

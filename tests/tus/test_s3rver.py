"""tus uploads on an S3 endpoint without UploadPartCopy (s3rver) and PostgreSQL."""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from blobstore.config import Settings
from blobstore.runtime import open_service
from blobstore.service import ArtifactService
from tests.tus.conftest import MiB, create, metadata, patch

pytestmark = pytest.mark.s3


@pytest.fixture
def settings(tmp_path: Path, request: pytest.FixtureRequest) -> Settings:
    return Settings(
        data_dir=tmp_path / "data",
        database_url=request.getfixturevalue("pg_url"),
        storage_url=request.getfixturevalue("s3rver_storage_url"),
        s3_endpoint_url=request.getfixturevalue("s3rver_endpoint_url"),
        auth_cache_seconds=0,
    )


@pytest.fixture
async def service(settings: Settings) -> AsyncIterator[ArtifactService]:
    async with open_service(settings, migrate=True) as opened:
        yield opened


async def test_a_9_mib_tus_upload_completes_on_s3rver(client: httpx.AsyncClient) -> None:
    data = os.urandom(9 * MiB)
    location = await create(client, len(data), **{"Upload-Metadata": metadata(filename="nine.bin")})
    offset = 0
    while offset < len(data):
        response = await patch(client, location, offset, data[offset : offset + 2 * MiB])
        assert response.status_code == 204, response.text
        offset = int(response.headers["upload-offset"])
    artifact_id = response.headers["blobstore-artifact-id"]
    info = (await client.get(f"/v1/artifacts/{artifact_id}")).json()
    assert info["sha256"] == hashlib.sha256(data).hexdigest()
    downloaded = await client.get(f"/v1/artifacts/{artifact_id}/content")
    assert downloaded.status_code == 200
    assert downloaded.content == data

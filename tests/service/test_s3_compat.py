"""Chunked uploads on S3 endpoints without optional features (s3rver: no UploadPartCopy, no
AbortMultipartUpload, ``If-None-Match`` ignored), compared with moto, through the whole service."""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from blobstore.config import Settings
from blobstore.errors import DigestMismatch
from blobstore.models import Caller
from blobstore.runtime import open_service
from blobstore.service import ArtifactService
from tests.fixtures.s3rver import S3rverEndpoint
from tests.fixtures.streams import chunks_of, read_back
from tests.service.scenarios import assert_a_conflicting_chunk_keeps_the_first
from tests.storage.conftest import S3_ENDPOINTS

pytestmark = pytest.mark.s3

MiB = 1024 * 1024


async def open_on(request: pytest.FixtureRequest, s3: str, tmp_path: Path) -> AsyncIterator[ArtifactService]:
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=request.getfixturevalue("pg_url"),
        storage_url=request.getfixturevalue(f"{s3}_storage_url"),
        s3_endpoint_url=request.getfixturevalue(f"{s3}_endpoint_url"),
    )
    async with open_service(settings, migrate=True) as svc:
        yield svc


@pytest.fixture(params=S3_ENDPOINTS)
async def s3_service(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ArtifactService]:
    async for svc in open_on(request, request.param, tmp_path):
        yield svc


@pytest.fixture
async def s3rver_service(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ArtifactService]:
    async for svc in open_on(request, "s3rver", tmp_path):
        yield svc


async def upload(service: ArtifactService, caller: Caller, data: bytes, chunk: int) -> str:
    session = await service.uploads.begin(caller, name="big.bin", size=len(data), chunk_size=chunk)
    for index, start in enumerate(range(0, len(data), chunk)):
        await service.uploads.put_chunk(caller, session.id, index, chunks_of(data[start : start + chunk]))
    artifact = await service.uploads.complete(caller, session.id, sha256=hashlib.sha256(data).hexdigest())
    return artifact.id


async def test_a_50_mib_chunked_upload_completes_on_s3rver(
    s3rver_service: ArtifactService, caller: Caller
) -> None:
    data = os.urandom(50 * MiB)
    artifact_id = await upload(s3rver_service, caller, data, 8 * MiB)
    assert await read_back(s3rver_service, caller, artifact_id) == data


async def test_a_conflicting_chunk_keeps_the_first_copy_and_completes_with_it(
    s3_service: ArtifactService, caller: Caller
) -> None:
    await assert_a_conflicting_chunk_keeps_the_first(s3_service, caller, chunk=5 * MiB, size=5 * MiB + 100)


async def test_abort_after_a_refused_completion_leaves_nothing_on_s3rver(
    s3rver_service: ArtifactService,
    caller: Caller,
    s3rver_endpoint: S3rverEndpoint,
    s3rver_client: object,
    request: pytest.FixtureRequest,
) -> None:
    location = request.getfixturevalue("s3rver_location")
    chunk = 5 * MiB
    data = os.urandom(2 * chunk)
    session = await s3rver_service.uploads.begin(caller, name="a.bin", size=len(data), chunk_size=chunk)
    for index in (0, 1):
        part = data[index * chunk : (index + 1) * chunk]
        await s3rver_service.uploads.put_chunk(caller, session.id, index, chunks_of(part))
    with pytest.raises(DigestMismatch):
        await s3rver_service.uploads.complete(caller, session.id, sha256="0" * 64)
    await s3rver_service.uploads.abort(caller, session.id)
    assert s3rver_endpoint.pending_upload_dirs(location.bucket) == []
    listed = s3rver_client.list_objects_v2(Bucket=location.bucket)  # type: ignore[attr-defined]
    assert listed.get("Contents", []) == []

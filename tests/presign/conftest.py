"""An app over a real S3 endpoint (moto or s3rver, over HTTP) with SQLite metadata, driven in-process.

The API runs in-process (ASGI); presigned URLs point at the S3 endpoint itself and are used over real HTTP,
through clients that carry no token.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from blobstore.api.deps import app_state
from blobstore.client import AsyncBlobstoreClient, RetryPolicy, UploadStateStore
from blobstore.config import Settings
from blobstore.service import ArtifactService
from tests.fixtures.asgi import running_app
from tests.fixtures.s3 import S3Location
from tests.storage.conftest import S3_ENDPOINTS

MiB = 1024 * 1024


@dataclass
class S3Place:
    """The endpoint a test's app stores into, and a boto3 client to look at it directly."""

    name: str
    location: S3Location
    client: Any
    endpoint: Any

    def multipart_uploads(self) -> list[str]:
        """Upload ids of the multipart uploads still pending in the test's bucket."""
        if self.name == "s3rver":
            # s3rver cannot list them over the API; its data directory holds one directory per upload.
            return [path.name for path in self.endpoint.pending_upload_dirs(self.location.bucket)]
        listed = self.client.list_multipart_uploads(Bucket=self.location.bucket)
        return [str(upload["UploadId"]) for upload in listed.get("Uploads", [])]

    def blob_keys(self) -> list[str]:
        listed = self.client.list_objects_v2(
            Bucket=self.location.bucket, Prefix=f"{self.location.prefix}/blobs/"
        )
        return [str(item["Key"]) for item in listed.get("Contents", [])]


@pytest.fixture(params=[pytest.param(name, marks=pytest.mark.s3) for name in S3_ENDPOINTS])
def s3_place(request: pytest.FixtureRequest) -> S3Place:
    name = request.param
    endpoint = request.getfixturevalue("s3_endpoint" if name == "s3" else "s3rver_endpoint")
    return S3Place(
        name,
        request.getfixturevalue(f"{name}_location"),
        request.getfixturevalue(f"{name}_client"),
        endpoint,
    )


def presign_settings(tmp_path: Path, place: S3Place, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "data_dir": tmp_path / "data",
        "database_url": f"sqlite+aiosqlite:///{tmp_path / 'metadata.sqlite3'}",
        "storage_url": place.location.url,
        "s3_endpoint_url": place.endpoint.endpoint_url,
        "min_chunk_size": 64 * 1024,
        "default_chunk_size": 1 * MiB,
        "max_chunk_size": 16 * MiB,
        "storage_chunk_size": 256 * 1024,
        "s3_presign_downloads": True,
        "s3_presign_uploads": True,
        **overrides,
    }
    return Settings(**values)


@pytest.fixture
def settings(tmp_path: Path, s3_place: S3Place) -> Settings:
    return presign_settings(tmp_path, s3_place)


@pytest.fixture
async def app(settings: Settings) -> AsyncIterator[FastAPI]:
    async with running_app(settings) as application:
        yield application


@pytest.fixture
def service(app: FastAPI) -> ArtifactService:
    return app_state(app).service


@pytest.fixture
async def api(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """The HTTP API, in-process."""
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        yield http


@pytest.fixture
async def storage_http() -> AsyncIterator[httpx.AsyncClient]:
    """Plain HTTP to the S3 endpoint, as a browser or curl following a presigned URL."""
    async with httpx.AsyncClient() as http:
        yield http


@pytest.fixture
async def blob_client(app: FastAPI, tmp_path: Path) -> AsyncIterator[AsyncBlobstoreClient]:
    async with AsyncBlobstoreClient(
        "http://127.0.0.1",
        transport=httpx.ASGITransport(app=app),
        state_store=UploadStateStore(tmp_path / "cache"),
        retry=RetryPolicy(attempts=2, base_delay=0.0, max_delay=0.0),
    ) as client:
        yield client

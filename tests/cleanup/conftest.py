"""A service with an injectable clock over SQLite + local disk and over PostgreSQL + S3 (moto over HTTP)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from blobstore.config import Settings
from blobstore.models import Caller
from blobstore.runtime import open_service
from blobstore.service import ArtifactService
from tests.cleanup.helpers import GRACE, UPLOAD_TTL, FakeClock

STACKS = ["local-sqlite", pytest.param("s3-postgresql", marks=[pytest.mark.postgres, pytest.mark.s3])]


def stack_settings(request: pytest.FixtureRequest, kind: str, data_dir: Path) -> Settings:
    overrides: dict[str, object] = {"data_dir": data_dir}
    if kind == "memory-sqlite":
        overrides["storage_url"] = "memory://"
    elif kind == "s3-postgresql":
        overrides["database_url"] = request.getfixturevalue("pg_url")
        overrides["storage_url"] = request.getfixturevalue("s3_storage_url")
        overrides["s3_endpoint_url"] = request.getfixturevalue("s3_endpoint_url")
    return Settings(
        **overrides,  # type: ignore[arg-type]
        storage_chunk_size=4096,
        min_chunk_size=1024,
        default_chunk_size=8192,
        gc_grace_seconds=GRACE,
        upload_ttl_seconds=UPLOAD_TTL,
        default_ttl_seconds=3600,
    )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=STACKS)
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    return stack_settings(request, request.param, tmp_path / "data")


@pytest.fixture
async def service(settings: Settings, clock: FakeClock) -> AsyncIterator[ArtifactService]:
    async with open_service(settings, migrate=True) as svc:
        svc.clock.source = clock
        yield svc


@pytest.fixture
def caller() -> Caller:
    return Caller(namespace="alpha", actor="tester")

"""A service over each storage backend and each metadata dialect.

Combinations: memory + SQLite, local disk + SQLite, S3 (moto over HTTP) + PostgreSQL and S3 (s3rver, which
lacks optional S3 features) + PostgreSQL; the same tests run on all of them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from blobstore.config import Settings
from blobstore.models import Caller
from blobstore.runtime import open_service
from blobstore.service import ArtifactService

BACKENDS = ["memory-sqlite", "local-sqlite", "s3-postgresql", "s3rver-postgresql"]


@pytest.fixture(params=BACKENDS)
async def service(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ArtifactService]:
    kind: str = request.param
    overrides: dict[str, object] = {"data_dir": tmp_path / "data", "storage_chunk_size": 64 * 1024}
    if kind == "memory-sqlite":
        overrides["storage_url"] = "memory://"
    elif kind.endswith("-postgresql"):
        s3 = kind.removesuffix("-postgresql")
        overrides["database_url"] = request.getfixturevalue("pg_url")
        overrides["storage_url"] = request.getfixturevalue(f"{s3}_storage_url")
        overrides["s3_endpoint_url"] = request.getfixturevalue(f"{s3}_endpoint_url")
    settings = Settings(**overrides, min_chunk_size=1024, default_chunk_size=64 * 1024)  # type: ignore[arg-type]
    async with open_service(settings, migrate=True) as svc:
        yield svc


@pytest.fixture
def caller() -> Caller:
    return Caller(namespace="alpha", actor="tester")


@pytest.fixture
def other() -> Caller:
    return Caller(namespace="beta", actor="other")

"""A real store for the handle tests: SQLite and local disk in a temporary data directory."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from blobstore.config import Settings
from blobstore.ids import new_artifact_id
from blobstore.models import Artifact, Caller, NewArtifact
from blobstore.runtime import open_service
from blobstore.service import ArtifactService

CALLER = Caller(namespace="tools")
STRANGER = Caller(namespace="someone-else")


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[ArtifactService]:
    async with open_service(Settings(data_dir=tmp_path / "data")) as svc:
        yield svc


async def put(
    service: ArtifactService,
    data: bytes,
    name: str,
    mime_type: str = "application/octet-stream",
    caller: Caller = CALLER,
    ttl_seconds: int | None = None,
) -> Artifact:
    async def one() -> AsyncIterator[bytes]:
        yield data

    return await service.create_artifact(
        caller, one(), name=name, mime_type=mime_type, expected_size=len(data), ttl_seconds=ttl_seconds
    )


async def expired(service: ArtifactService, over: Artifact, namespace: str = CALLER.namespace) -> Artifact:
    """An artifact of ``namespace`` that expired an hour ago, over the bytes of ``over``."""
    now = service.clock()
    record = await service.repo.get_blob(over.blob_id)
    assert record is not None
    gone = NewArtifact(
        id=new_artifact_id(),
        namespace=namespace,
        name="old.png",
        mime_type="image/png",
        created_at=now - timedelta(hours=2),
        expires_at=now - timedelta(hours=1),
        pinned=False,
        metadata={},
        media={},
    )
    return (await service.repo.commit_artifact(blob=record.info, artifact=gone)).artifact


def audit_lines(service: ArtifactService, action: str) -> list[dict[str, Any]]:
    path = service.settings.resolved_audit_log
    lines = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return [line for line in lines if line["action"] == action]

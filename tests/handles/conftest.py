"""A real store for the handle tests: SQLite and local disk in a temporary data directory."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from blobstore.config import Settings
from blobstore.models import Artifact, Caller
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


def audit_lines(service: ArtifactService, action: str) -> list[dict[str, Any]]:
    path = service.settings.resolved_audit_log
    lines = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return [line for line in lines if line["action"] == action]

"""The metadata repository: every SQL statement the service runs, on SQLite or PostgreSQL.

Built on SQLAlchemy 2 Core (async). SQLite (aiosqlite, WAL) serializes writers with ``BEGIN IMMEDIATE``;
PostgreSQL (asyncpg) uses row locks. Every query that touches artifacts or uploads is scoped by namespace.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from blobstore.models import (
    Artifact,
    BlobRecord,
    ChunkRecord,
    TokenRecord,
    UploadSession,
    UploadState,
)
from blobstore.storage.base import BlobInfo


@dataclass(frozen=True, slots=True)
class NewArtifact:
    id: str
    namespace: str
    name: str
    mime_type: str
    created_at: datetime
    expires_at: datetime | None
    pinned: bool
    metadata: dict[str, Any]
    media: dict[str, Any]


@dataclass(frozen=True, slots=True)
class CommitResult:
    artifact: Artifact
    blob: BlobRecord
    deduplicated: bool
    """True when the artifact was attached to an existing live blob: the caller deletes its own new generation."""


@dataclass(frozen=True, slots=True)
class AuditEvent:
    time: datetime
    actor: str
    namespace: str | None
    action: str
    result: str
    artifact_id: str | None = None
    size: int | None = None
    mime_type: str | None = None
    duration_ms: int | None = None


class _Unset:
    pass


UNSET: Any = _Unset()

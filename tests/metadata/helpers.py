"""Builders for repository tests."""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from blobstore.metadata import migrate
from blobstore.metadata.engine import create_engine
from blobstore.models import BlobInfo, NewArtifact, UploadSession, UploadState

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def blob_info(content: bytes, *, key: str | None = None) -> BlobInfo:
    return BlobInfo(
        key=key or f"ab/cd/{uuid.uuid4().hex}",
        size=len(content),
        sha256=hashlib.sha256(content).hexdigest(),
        block_size=4,
        block_xxh3=tuple(f"{i:032x}" for i in range((len(content) + 3) // 4)),
    )


def new_artifact(
    namespace: str = "ns",
    *,
    created_at: datetime = T0,
    expires_at: datetime | None = None,
    pinned: bool = False,
    artifact_id: str | None = None,
) -> NewArtifact:
    return NewArtifact(
        id=artifact_id or uuid.uuid4().hex,
        namespace=namespace,
        name="report.pdf",
        mime_type="application/pdf",
        created_at=created_at,
        expires_at=expires_at,
        pinned=pinned,
        metadata={"k": "v"},
        media={"width": 3},
    )


def upload_session(
    namespace: str = "ns",
    *,
    upload_id: str | None = None,
    state: UploadState = UploadState.OPEN,
    expires_at: datetime = T0 + timedelta(hours=1),
) -> UploadSession:
    return UploadSession(
        id=upload_id or uuid.uuid4().hex,
        namespace=namespace,
        name="big.bin",
        mime_type="application/octet-stream",
        declared_size=100,
        declared_sha256=None,
        chunk_size=10,
        staging_ref="staging/x",
        state=state,
        ttl_seconds=3600,
        metadata={"a": 1},
        protocol="native",
        created_at=T0,
        updated_at=T0,
        expires_at=expires_at,
        artifact_id=None,
    )


async def migrated_then(url: str, statement: str) -> None:
    """Bring the database at ``url`` to the head revision, then run ``statement`` on it (committed)."""
    await migrate.upgrade_async(url)
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(sa.text(statement))
    finally:
        await engine.dispose()

"""Artifact rows: the commit that records an artifact over a blob (dedup, quota, completion in one
transaction), and the reads and changes of one namespace's artifacts."""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

import anyio
import anyio.to_thread
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from blobstore.errors import CompletionLost, QuotaExceeded
from blobstore.metadata.repository import rows
from blobstore.metadata.repository.base import LIVE, RepositoryBase, newest_first, visible
from blobstore.metadata.repository.blob_refs import attach_blob
from blobstore.metadata.repository.group_commit import GroupCommit
from blobstore.metadata.tables import artifacts, blobs, uploads
from blobstore.models import (
    UNSET,
    Artifact,
    BlobInfo,
    BlobRecord,
    CommitResult,
    CompletionClaim,
    NewArtifact,
    UploadState,
)


class ArtifactRepository(RepositoryBase):
    """Artifact rows, scoped by namespace, and the commit that creates them."""

    def __init__(self, engine: AsyncEngine, **options: Any) -> None:
        super().__init__(engine, **options)
        # SQLite has one writer: concurrent commits share transactions rather than queue for its lock.
        writer = self._sync_writer
        self._commits = GroupCommit[CommitResult](writer) if writer is not None else None

    async def commit_artifact(
        self,
        *,
        blob: BlobInfo,
        artifact: NewArtifact,
        quota: int | None = None,
        completion: CompletionClaim | None = None,
        now: datetime | None = None,
        dedup_only: bool = False,
    ) -> CommitResult:
        """Record ``artifact`` over ``blob``'s content in one transaction, deduplicating onto a live blob.

        With ``dedup_only`` (``blob`` was not kept: the store held its content when it arrived), the artifact
        can only reference a live blob of that content; when none is live any more, nothing is committed and
        :class:`ContentNotLive` is raised.

        With ``quota``, the namespace's usage is checked in the same transaction, serialised per namespace
        (``BEGIN IMMEDIATE`` on SQLite, a transaction-scoped advisory lock on PostgreSQL), so concurrent
        commits can never take it past the quota together: :class:`QuotaExceeded`. With ``completion``, the
        upload moves from ``completing`` to ``completed`` in the same transaction, and only while ``owner``
        still holds its completion lease (else :class:`CompletionLost` and nothing is committed): an artifact
        exists exactly when its upload says ``completed``.

        The live blob is read ``FOR SHARE`` on PostgreSQL, which a GC claim's ``FOR UPDATE`` conflicts with,
        so a blob cannot be tombstoned between the dedup decision and the new reference; a blob a claim
        already locked is seen as tombstoned once the claim commits, and the content gets a new blob row.
        Concurrent dedups onto one blob share the lock, so a popular blob is not a hot row. SQLite gets the
        same guarantee from ``BEGIN IMMEDIATE``.
        """
        commit = functools.partial(
            self._commit_artifact,
            blob=blob,
            artifact=artifact,
            quota=quota,
            completion=completion,
            now=now,
            dedup_only=dedup_only,
        )
        if self._commits is not None:
            return await self._commits.run(commit)
        async with self._engine.begin() as conn:
            return await conn.run_sync(commit)

    def _commit_artifact(
        self,
        conn: sa.Connection,
        *,
        blob: BlobInfo,
        artifact: NewArtifact,
        quota: int | None,
        completion: CompletionClaim | None,
        now: datetime | None,
        dedup_only: bool = False,
    ) -> CommitResult:
        moment = now if now is not None else artifact.created_at
        if completion is not None:
            self._finish_completion(conn, completion, artifact.id, moment)
        if quota is not None:
            lock = self._namespace_lock("quota", artifact.namespace)
            if lock is not None:
                conn.execute(lock)
            used = conn.scalar(
                sa.select(sa.func.coalesce(sa.func.sum(artifacts.c.size), 0)).where(
                    artifacts.c.namespace == artifact.namespace, visible(moment)
                )
            )
            if int(used or 0) + blob.size > quota:
                raise QuotaExceeded(quota=quota, used=int(used or 0))
        record, deduplicated = attach_blob(conn, blob, created_at=artifact.created_at, dedup_only=dedup_only)
        stored = self._insert_artifact(conn, artifact, record)
        return CommitResult(artifact=stored, blob=record, deduplicated=deduplicated)

    def _finish_completion(
        self, conn: sa.Connection, claim: CompletionClaim, artifact_id: str, now: datetime
    ) -> None:
        finished = conn.execute(
            sa.update(uploads)
            .where(
                uploads.c.id == claim.upload_id,
                uploads.c.state == UploadState.COMPLETING.value,
                uploads.c.completion_owner == claim.owner,
            )
            .values(
                state=UploadState.COMPLETED.value,
                artifact_id=artifact_id,
                completion_owner=None,
                completion_lease_until=None,
                updated_at=now,
            )
        )
        if finished.rowcount != 1:
            raise CompletionLost()

    def _insert_artifact(self, conn: sa.Connection, artifact: NewArtifact, blob: BlobRecord) -> Artifact:
        row = conn.execute(
            _insert_artifact(),
            {
                "id": artifact.id,
                "namespace": artifact.namespace,
                "name": artifact.name,
                "mime_type": artifact.mime_type,
                "size": blob.info.size,
                "sha256": blob.info.sha256,
                "blob_id": blob.id,
                "created_at": artifact.created_at,
                "expires_at": artifact.expires_at,
                "pinned": artifact.pinned,
                "user_metadata": artifact.metadata,
                "media": artifact.media,
            },
        ).one()
        return rows.artifact(row._mapping)

    async def get_artifact(self, namespace: str, artifact_id: str, *, now: datetime) -> Artifact | None:
        """The artifact, or None when it is missing, in another namespace or expired."""
        row = await self._first(
            sa.select(artifacts).where(
                artifacts.c.id == artifact_id,
                artifacts.c.namespace == namespace,
                visible(now),
            )
        )
        return None if row is None else rows.artifact(row._mapping)

    async def get_artifact_with_blob(
        self, namespace: str, artifact_id: str, *, now: datetime
    ) -> tuple[Artifact, BlobRecord] | None:
        if self._lookups is not None:
            return await anyio.to_thread.run_sync(
                self._lookups.artifact_with_blob, namespace, artifact_id, now, limiter=self._sync_limiter
            )
        row = await self._first(
            _artifact_with_blob(), {"artifact_id": artifact_id, "namespace": namespace, "now": now}
        )
        return _artifact_and_blob(row)

    def live_content_blocking(self, sha256: str, size: int) -> bool:
        """Whether a live blob holds ``sha256`` of ``size`` bytes now; for a worker thread, where
        :attr:`blocking_reads`. A single-request upload asks it before it keeps a short body (the commit then
        deduplicates onto that blob, and checks again that it is live)."""
        assert self._lookups is not None
        return self._lookups.live_content(sha256, size)

    @property
    def blocking_reads(self) -> bool:
        """Whether the ``*_blocking`` reads are available (a SQLite file: its query-only connections)."""
        return self._lookups is not None

    def get_artifact_with_blob_blocking(
        self, namespace: str, artifact_id: str, *, now: datetime
    ) -> tuple[Artifact, BlobRecord] | None:
        """:meth:`get_artifact_with_blob` for a caller on a worker thread, where :attr:`blocking_reads`.

        The service's range read looks the artifact up and reads its bytes in one worker-thread call.
        """
        assert self._lookups is not None
        return self._lookups.artifact_with_blob(namespace, artifact_id, now)

    def get_artifact_with_blob_nowait(
        self, namespace: str, artifact_id: str, *, now: datetime
    ) -> tuple[Artifact, BlobRecord] | None:
        """:meth:`get_artifact_with_blob_blocking` for the event loop, where :attr:`blocking_reads`: raises
        :class:`~blobstore.nowait.WouldBlock` where it would wait for a lock (``blobstore.nowait``)."""
        assert self._lookups is not None
        return self._lookups.artifact_with_blob(namespace, artifact_id, now, wait=False)

    async def list_artifacts(
        self,
        namespace: str,
        *,
        now: datetime,
        limit: int,
        after: tuple[datetime, str] | None,
    ) -> list[Artifact]:
        """A keyset page, newest first: ``(created_at, id)`` descending, continuing strictly after (older
        than) the ``after`` position; rows inserted meanwhile never shift later pages."""
        query = newest_first(
            sa.select(artifacts).where(artifacts.c.namespace == namespace, visible(now)), after, limit
        )
        async with self._reader.connect() as conn:
            selected = (await conn.execute(query)).all()
        return [rows.artifact(row._mapping) for row in selected]

    async def delete_artifact(self, namespace: str, artifact_id: str) -> Artifact | None:
        """Delete the artifact row (expired or not) and return it; its blob is left for the cleanup job."""
        async with self._engine.begin() as conn:
            row = (
                await conn.execute(
                    sa.delete(artifacts)
                    .where(artifacts.c.id == artifact_id, artifacts.c.namespace == namespace)
                    .returning(*artifacts.c)
                )
            ).first()
        return None if row is None else rows.artifact(row._mapping)

    async def update_artifact(
        self,
        namespace: str,
        artifact_id: str,
        *,
        expires_at: datetime | None = UNSET,
        pinned: bool = UNSET,
        now: datetime,
    ) -> Artifact | None:
        """Change the expiry and/or pin of a visible artifact; None when it is missing or already expired."""
        values: dict[str, Any] = {}
        if expires_at is not UNSET:
            values["expires_at"] = expires_at
        if pinned is not UNSET:
            values["pinned"] = pinned
        if not values:
            return await self.get_artifact(namespace, artifact_id, now=now)
        async with self._engine.begin() as conn:
            row = (
                await conn.execute(
                    sa.update(artifacts)
                    .where(
                        artifacts.c.id == artifact_id,
                        artifacts.c.namespace == namespace,
                        visible(now),
                    )
                    .values(**values)
                    .returning(*artifacts.c)
                )
            ).first()
        return None if row is None else rows.artifact(row._mapping)

    async def find_artifacts_with_content(
        self, namespace: str, sha256: str, *, now: datetime, limit: int = 20
    ) -> list[Artifact]:
        """Visible artifacts of ``namespace`` over the live blob holding ``sha256`` (newest first)."""
        query = (
            sa.select(artifacts)
            .join(blobs, blobs.c.id == artifacts.c.blob_id)
            .where(
                blobs.c.sha256 == sha256,
                blobs.c.state == LIVE,
                artifacts.c.namespace == namespace,
                visible(now),
            )
            .order_by(artifacts.c.created_at.desc(), artifacts.c.id.desc())
            .limit(limit)
        )
        return [rows.artifact(row._mapping) for row in await self._all(query)]

    async def namespace_usage(self, namespace: str, *, now: datetime) -> int:
        """Bytes of the namespace's visible artifacts, counted per artifact (dedup does not discount)."""
        async with self._reader.connect() as conn:
            total = await conn.scalar(
                sa.select(sa.func.coalesce(sa.func.sum(artifacts.c.size), 0)).where(
                    artifacts.c.namespace == namespace, visible(now)
                )
            )
        return int(total or 0)


def _artifact_and_blob(row: sa.Row[Any] | None) -> tuple[Artifact, BlobRecord] | None:
    if row is None:
        return None
    mapping = row._mapping
    blob_row = {name: mapping[label] for name, label in _blob_labels()}
    return rows.artifact(mapping), rows.blob_record(blob_row)


@functools.cache
def _blob_labels() -> tuple[tuple[str, str], ...]:
    """The blob columns of :func:`_artifact_with_blob` and their labels there, built once."""
    return tuple((column.name, f"b_{column.name}") for column in blobs.c)


@functools.cache
def _artifact_with_blob() -> sa.Select[Any]:
    """The lookup of every content read, built once with bound parameters: SQLAlchemy memoises a statement
    object's cache key, so executing the same object again skips building the statement and its key."""
    return (
        sa.select(artifacts, *(blobs.c[name].label(label) for name, label in _blob_labels()))
        .join(blobs, blobs.c.id == artifacts.c.blob_id)
        .where(
            artifacts.c.id == sa.bindparam("artifact_id"),
            artifacts.c.namespace == sa.bindparam("namespace"),
            visible(sa.bindparam("now", type_=artifacts.c.expires_at.type)),
        )
    )


@functools.cache
def _insert_artifact() -> sa.Insert:
    return sa.insert(artifacts).returning(*artifacts.c)

"""The metadata repository: every SQL statement the service runs, on SQLite or PostgreSQL.

Built on SQLAlchemy 2 Core (async). SQLite (aiosqlite, WAL) serializes writers with ``BEGIN IMMEDIATE``;
PostgreSQL (asyncpg) uses row locks. Every query that touches artifacts or uploads is scoped by namespace.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import anyio
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from blobstore.diskspace import SpaceReserve, check_free
from blobstore.errors import (
    BlobstoreError,
    Conflict,
    NotFound,
    QuotaExceeded,
    StorageFull,
    StorageUnavailable,
    TooManyUploads,
)
from blobstore.metadata.engine import READ_ONLY, create_engine, create_sqlite_read_engine
from blobstore.metadata.tables import (
    artifacts,
    audit_events,
    blobs,
    tokens,
    upload_chunks,
    upload_tails,
    uploads,
)
from blobstore.models import (
    Artifact,
    BlobRecord,
    ChunkRecord,
    Scope,
    TokenRecord,
    UploadSession,
    UploadState,
)
from blobstore.storage.base import BlobInfo

T = TypeVar("T")

logger = logging.getLogger("blobstore.metadata")


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
    """True when the artifact was attached to an existing live blob: the caller deletes its new generation."""


@dataclass(frozen=True, slots=True)
class CompletionClaim:
    """The upload a commit completes, and the completion lease owner it must still be held by."""

    upload_id: str
    owner: str


class CompletionLost(Conflict):
    """The completion lease passed to another completer: this commit would duplicate its result."""

    default_message = "another request took over this completion"


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


@dataclass(frozen=True, slots=True)
class UploadTail:
    """The bytes of a tus upload past its last full staged chunk, starting at ``offset``."""

    upload_id: str
    offset: int
    data: bytes
    updated_at: datetime

    @property
    def end(self) -> int:
        return self.offset + len(self.data)


class _Unset:
    pass


UNSET: Any = _Unset()


_LIVE = "live"
_TOMBSTONED = "tombstoned"
_OPEN_STATES = (UploadState.OPEN.value, UploadState.COMPLETING.value)
_KEY_BATCH = 500
_COMMIT_ATTEMPTS = 3


class MetadataRepository:
    """Every metadata read and write of the service, over one :class:`AsyncEngine`.

    Writes run in ``BEGIN IMMEDIATE`` transactions on SQLite (one writer at a time) and in read-committed
    transactions with explicit row locks on PostgreSQL. Reads on SQLite start deferred transactions, which in
    WAL mode never wait for a writer.
    """

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        sync_reader: sa.Engine | None = None,
        reserve: SpaceReserve | None = None,
    ) -> None:
        self._engine = engine
        self._reader = engine.execution_options(**{READ_ONLY: True})
        self._sync_reader = sync_reader
        self._sync_limiter = anyio.CapacityLimiter(8)
        self._reserve = reserve

    @classmethod
    async def open(cls, database_url: str, *, reserve: SpaceReserve | None = None) -> MetadataRepository:
        """The repository over ``database_url``; ``reserve`` is the disk reserve :meth:`freeing` releases."""
        return cls(
            create_engine(database_url), sync_reader=create_sqlite_read_engine(database_url), reserve=reserve
        )

    async def close(self) -> None:
        await self._engine.dispose()
        if self._sync_reader is not None:
            self._sync_reader.dispose()

    async def _first(self, statement: sa.Select[Any]) -> sa.Row[Any] | None:
        """The first row of a read-only statement, on the fast synchronous SQLite path where there is one."""
        if self._sync_reader is None:
            async with self._reader.connect() as conn:
                first: sa.Row[Any] | None = (await conn.execute(statement)).first()
                return first
        row: sa.Row[Any] | None = await anyio.to_thread.run_sync(
            self._first_sync, statement, limiter=self._sync_limiter
        )
        return row

    async def _all(self, statement: sa.Select[Any]) -> Sequence[sa.Row[Any]]:
        """Every row of a read-only statement."""
        async with self._reader.connect() as conn:
            rows: Sequence[sa.Row[Any]] = (await conn.execute(statement)).all()
            return rows

    def _first_sync(self, statement: sa.Select[Any]) -> sa.Row[Any] | None:
        assert self._sync_reader is not None
        with self._sync_reader.connect() as conn:
            return conn.execute(statement).first()

    @property
    def engine(self) -> AsyncEngine:
        return self._engine

    @property
    def dialect(self) -> str:
        return self._engine.dialect.name

    async def check(self) -> None:
        """Raise :class:`StorageUnavailable` unless the database answers a query, :class:`StorageFull` when a
        SQLite database's file system is full (readiness probe). Tops the disk reserve up on the way."""
        try:
            async with self._reader.connect() as conn:
                await conn.execute(sa.select(1))
        except BlobstoreError:
            raise
        except (sa.exc.SQLAlchemyError, OSError) as exc:
            raise StorageUnavailable("metadata database is unavailable") from exc
        database = sqlite_file(self._engine.url)
        if database is not None:
            await self.keep_reserve()
            await anyio.to_thread.run_sync(check_free, database.parent)

    # -- the disk reserve ------------------------------------------------------------------------------------

    async def keep_reserve(self) -> bool:
        """Allocate the disk reserve (SQLite) as far as there is room; True when whole or when none."""
        if self._reserve is None:
            return True
        try:
            return await anyio.to_thread.run_sync(self._reserve.ensure)
        except OSError as exc:
            logger.warning("cannot allocate the disk reserve: %s", exc.strerror)
            return False

    async def freeing(self, work: Callable[[], Awaitable[T]]) -> T:
        """Run ``work``, a step that frees space (a delete, a cleanup step), even when the disk is full.

        When it fails with :class:`StorageFull`, the disk reserve is released and ``work`` runs once more with
        that room; afterwards the reserve is allocated again as far as there is room. ``work`` must be safe
        to repeat (each delete and cleanup step is idempotent).
        """
        try:
            return await work()
        except StorageFull:
            reserve = self._reserve
            if reserve is None:
                raise
            released = await anyio.to_thread.run_sync(reserve.release)
            if not released:
                raise
        logger.warning("the data directory is full: released the %d-byte disk reserve for a delete", released)
        try:
            return await work()
        finally:
            await self.keep_reserve()

    # -- artifacts -------------------------------------------------------------------------------------------

    async def commit_artifact(
        self,
        *,
        blob: BlobInfo,
        artifact: NewArtifact,
        quota: int | None = None,
        completion: CompletionClaim | None = None,
        now: datetime | None = None,
    ) -> CommitResult:
        """Record ``artifact`` over ``blob``'s content in one transaction, deduplicating onto a live blob.

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
        same_content = (blobs.c.sha256 == blob.sha256, blobs.c.size == blob.size, blobs.c.state == _LIVE)
        moment = now if now is not None else artifact.created_at
        async with self._engine.begin() as conn:
            if completion is not None:
                await self._finish_completion(conn, completion, artifact.id, moment)
            if quota is not None:
                await self._lock_namespace(conn, "quota", artifact.namespace)
                used = await conn.scalar(
                    sa.select(sa.func.coalesce(sa.func.sum(artifacts.c.size), 0)).where(
                        artifacts.c.namespace == artifact.namespace, _visible(moment)
                    )
                )
                if int(used or 0) + blob.size > quota:
                    raise QuotaExceeded(quota=quota, used=int(used or 0))
            for _ in range(_COMMIT_ATTEMPTS):
                # Clear a pending GC mark first, by an exclusive row lock taken only when there is a mark:
                # taking FOR SHARE first and then updating would deadlock two commits of the same content.
                await conn.execute(
                    sa.update(blobs)
                    .where(*same_content, blobs.c.unreferenced_since.is_not(None))
                    .values(unreferenced_since=None)
                )
                found = (
                    await conn.execute(sa.select(blobs).where(*same_content).with_for_update(read=True))
                ).first()
                if found is not None:
                    record = _blob_record(found._mapping)
                    stored = await self._insert_artifact(conn, artifact, record)
                    return CommitResult(artifact=stored, blob=record, deduplicated=True)
                inserted = (
                    await conn.execute(
                        self._insert(blobs)
                        .values(
                            sha256=blob.sha256,
                            storage_key=blob.key,
                            size=blob.size,
                            # The columns keep their first names: they hold the integrity blocks.
                            chunk_size=blob.block_size,
                            chunk_xxh3=",".join(blob.block_xxh3),
                            state=_LIVE,
                            created_at=artifact.created_at,
                        )
                        # A literal predicate: a bound parameter stops matching the partial index once
                        # PostgreSQL switches the prepared statement to a generic plan (6th execution).
                        .on_conflict_do_nothing(
                            index_elements=["sha256"], index_where=sa.text(f"state = '{_LIVE}'")
                        )
                        .returning(*blobs.c)
                    )
                ).first()
                if inserted is not None:
                    record = _blob_record(inserted._mapping)
                    stored = await self._insert_artifact(conn, artifact, record)
                    return CommitResult(artifact=stored, blob=record, deduplicated=False)
                # Another transaction committed a live blob with this digest after our SELECT; dedup onto it.
            # Raised inside the transaction, so that it rolls back (the completion above included).
            raise Conflict("concurrent commits of the same content kept conflicting; retry")

    async def _finish_completion(
        self, conn: AsyncConnection, claim: CompletionClaim, artifact_id: str, now: datetime
    ) -> None:
        finished = await conn.execute(
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

    async def _lock_namespace(self, conn: AsyncConnection, purpose: str, namespace: str) -> None:
        """Serialise the rest of this transaction with every other one that locks ``(purpose, namespace)``.

        SQLite's ``BEGIN IMMEDIATE`` already serialises all writers; PostgreSQL takes a transaction-scoped
        advisory lock, released at commit or rollback.
        """
        if self.dialect == "postgresql":
            key = _advisory_key(f"{purpose}:{namespace}")
            await conn.execute(sa.select(sa.func.pg_advisory_xact_lock(key)))

    async def _insert_artifact(
        self, conn: AsyncConnection, artifact: NewArtifact, blob: BlobRecord
    ) -> Artifact:
        row = (
            await conn.execute(
                sa.insert(artifacts)
                .values(
                    id=artifact.id,
                    namespace=artifact.namespace,
                    name=artifact.name,
                    mime_type=artifact.mime_type,
                    size=blob.info.size,
                    sha256=blob.info.sha256,
                    blob_id=blob.id,
                    created_at=artifact.created_at,
                    expires_at=artifact.expires_at,
                    pinned=artifact.pinned,
                    user_metadata=artifact.metadata,
                    media=artifact.media,
                )
                .returning(*artifacts.c)
            )
        ).one()
        return _artifact(row._mapping)

    async def get_artifact(self, namespace: str, artifact_id: str, *, now: datetime) -> Artifact | None:
        """The artifact, or None when it is missing, in another namespace or expired."""
        row = await self._first(
            sa.select(artifacts).where(
                artifacts.c.id == artifact_id,
                artifacts.c.namespace == namespace,
                _visible(now),
            )
        )
        return None if row is None else _artifact(row._mapping)

    async def get_artifact_with_blob(
        self, namespace: str, artifact_id: str, *, now: datetime
    ) -> tuple[Artifact, BlobRecord] | None:
        blob_columns = [column.label(f"b_{column.name}") for column in blobs.c]
        row = await self._first(
            sa.select(artifacts, *blob_columns)
            .join(blobs, blobs.c.id == artifacts.c.blob_id)
            .where(
                artifacts.c.id == artifact_id,
                artifacts.c.namespace == namespace,
                _visible(now),
            )
        )
        if row is None:
            return None
        mapping = row._mapping
        blob_row = {column.name: mapping[f"b_{column.name}"] for column in blobs.c}
        return _artifact(mapping), _blob_record(blob_row)

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
        query = sa.select(artifacts).where(artifacts.c.namespace == namespace, _visible(now))
        if after is not None:
            after_time, after_id = after
            query = query.where(
                sa.or_(
                    artifacts.c.created_at < after_time,
                    sa.and_(artifacts.c.created_at == after_time, artifacts.c.id < after_id),
                )
            )
        query = query.order_by(artifacts.c.created_at.desc(), artifacts.c.id.desc()).limit(limit)
        async with self._reader.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [_artifact(row._mapping) for row in rows]

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
        return None if row is None else _artifact(row._mapping)

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
                        _visible(now),
                    )
                    .values(**values)
                    .returning(*artifacts.c)
                )
            ).first()
        return None if row is None else _artifact(row._mapping)

    async def find_artifacts_with_content(
        self, namespace: str, sha256: str, *, now: datetime, limit: int = 20
    ) -> list[Artifact]:
        """Visible artifacts of ``namespace`` over the live blob holding ``sha256`` (newest first)."""
        query = (
            sa.select(artifacts)
            .join(blobs, blobs.c.id == artifacts.c.blob_id)
            .where(
                blobs.c.sha256 == sha256,
                blobs.c.state == _LIVE,
                artifacts.c.namespace == namespace,
                _visible(now),
            )
            .order_by(artifacts.c.created_at.desc(), artifacts.c.id.desc())
            .limit(limit)
        )
        return [_artifact(row._mapping) for row in await self._all(query)]

    async def namespace_usage(self, namespace: str, *, now: datetime) -> int:
        """Bytes of the namespace's visible artifacts, counted per artifact (dedup does not discount)."""
        async with self._reader.connect() as conn:
            total = await conn.scalar(
                sa.select(sa.func.coalesce(sa.func.sum(artifacts.c.size), 0)).where(
                    artifacts.c.namespace == namespace, _visible(now)
                )
            )
        return int(total or 0)

    # -- blobs -----------------------------------------------------------------------------------------------

    async def get_blob(self, blob_id: int) -> BlobRecord | None:
        async with self._reader.connect() as conn:
            row = (await conn.execute(sa.select(blobs).where(blobs.c.id == blob_id))).first()
        return None if row is None else _blob_record(row._mapping)

    async def find_live_blob(self, sha256: str) -> BlobRecord | None:
        """The live blob holding this content; never a tombstoned one."""
        async with self._reader.connect() as conn:
            row = (
                await conn.execute(sa.select(blobs).where(blobs.c.sha256 == sha256, blobs.c.state == _LIVE))
            ).first()
        return None if row is None else _blob_record(row._mapping)

    # -- uploads ---------------------------------------------------------------------------------------------

    async def create_upload(self, session: UploadSession, *, max_open: int | None = None) -> None:
        """Insert the session; with ``max_open``, only while the namespace has fewer open (or completing)
        uploads, counted in the same transaction under a per-namespace lock (else :class:`TooManyUploads`).
        """
        async with self._engine.begin() as conn:
            if max_open is not None:
                await self._lock_namespace(conn, "open-uploads", session.namespace)
                count = await conn.scalar(
                    sa.select(sa.func.count())
                    .select_from(uploads)
                    .where(uploads.c.namespace == session.namespace, uploads.c.state.in_(_OPEN_STATES))
                )
                if int(count or 0) >= max_open:
                    raise TooManyUploads(limit=max_open)
            await conn.execute(
                sa.insert(uploads).values(
                    id=session.id,
                    namespace=session.namespace,
                    name=session.name,
                    mime_type=session.mime_type,
                    declared_size=session.declared_size,
                    declared_sha256=session.declared_sha256,
                    chunk_size=session.chunk_size,
                    staging_ref=session.staging_ref,
                    state=session.state.value,
                    ttl_seconds=session.ttl_seconds,
                    user_metadata=session.metadata,
                    protocol=session.protocol,
                    created_at=session.created_at,
                    updated_at=session.updated_at,
                    expires_at=session.expires_at,
                    artifact_id=session.artifact_id,
                    completion_owner=session.completion_owner,
                    completion_lease_until=session.completion_lease_until,
                )
            )

    async def get_upload(self, namespace: str, upload_id: str) -> UploadSession | None:
        async with self._reader.connect() as conn:
            row = (
                await conn.execute(
                    sa.select(uploads).where(uploads.c.id == upload_id, uploads.c.namespace == namespace)
                )
            ).first()
        return None if row is None else _upload(row._mapping)

    async def count_open_uploads(self, namespace: str) -> int:
        """Uploads of the namespace still holding staging space: open or completing."""
        async with self._reader.connect() as conn:
            count = await conn.scalar(
                sa.select(sa.func.count())
                .select_from(uploads)
                .where(uploads.c.namespace == namespace, uploads.c.state.in_(_OPEN_STATES))
            )
        return int(count or 0)

    async def count_all_open_uploads(self) -> int:
        """Uploads of every namespace still holding staging space (the ``blobstore_uploads_open`` gauge)."""
        async with self._reader.connect() as conn:
            count = await conn.scalar(
                sa.select(sa.func.count()).select_from(uploads).where(uploads.c.state.in_(_OPEN_STATES))
            )
        return int(count or 0)

    async def record_chunk(self, chunk: ChunkRecord) -> ChunkRecord:
        """Insert the chunk unless its index is already recorded; return the row stored for that index.

        Raises :class:`NotFound` when the upload does not exist. The caller compares the returned checksums
        with its own to tell a harmless resend from a conflict.
        """
        async with self._engine.begin() as conn:
            bumped = await conn.execute(
                sa.update(uploads).where(uploads.c.id == chunk.upload_id).values(updated_at=chunk.received_at)
            )
            if bumped.rowcount == 0:
                raise NotFound("upload not found")
            await conn.execute(
                self._insert(upload_chunks)
                .values(
                    upload_id=chunk.upload_id,
                    index=chunk.index,
                    size=chunk.size,
                    sha256=chunk.sha256,
                    xxh3=chunk.xxh3,
                    received_at=chunk.received_at,
                )
                .on_conflict_do_nothing(index_elements=["upload_id", "index"])
            )
            row = (
                await conn.execute(
                    sa.select(upload_chunks).where(
                        upload_chunks.c.upload_id == chunk.upload_id, upload_chunks.c.index == chunk.index
                    )
                )
            ).one()
        return _chunk(row._mapping)

    async def list_chunks(self, upload_id: str) -> list[ChunkRecord]:
        rows = await self._all(
            sa.select(upload_chunks)
            .where(upload_chunks.c.upload_id == upload_id)
            .order_by(upload_chunks.c.index)
        )
        return [_chunk(row._mapping) for row in rows]

    async def get_chunk(self, upload_id: str, index: int) -> ChunkRecord | None:
        async with self._reader.connect() as conn:
            row = (
                await conn.execute(
                    sa.select(upload_chunks).where(
                        upload_chunks.c.upload_id == upload_id, upload_chunks.c.index == index
                    )
                )
            ).first()
        return None if row is None else _chunk(row._mapping)

    async def transition_upload(
        self,
        upload_id: str,
        *,
        from_states: Sequence[UploadState],
        to_state: UploadState,
        artifact_id: str | None = None,
        now: datetime,
    ) -> bool:
        """Compare-and-set the upload's state; True only for the one caller whose update matched."""
        values: dict[str, Any] = {"state": to_state.value, "updated_at": now}
        if to_state is not UploadState.COMPLETING:
            values.update(completion_owner=None, completion_lease_until=None)
        if artifact_id is not None:
            values["artifact_id"] = artifact_id
        async with self._engine.begin() as conn:
            result = await conn.execute(
                sa.update(uploads)
                .where(uploads.c.id == upload_id, uploads.c.state.in_([state.value for state in from_states]))
                .values(**values)
            )
        return result.rowcount == 1

    async def begin_completion(
        self, upload_id: str, *, owner: str, lease_until: datetime, now: datetime
    ) -> bool:
        """Move the upload from ``open`` to ``completing`` under a completion lease held by ``owner``; True
        only for the one caller whose compare-and-set matched."""
        async with self._engine.begin() as conn:
            result = await conn.execute(
                sa.update(uploads)
                .where(uploads.c.id == upload_id, uploads.c.state == UploadState.OPEN.value)
                .values(
                    state=UploadState.COMPLETING.value,
                    completion_owner=owner,
                    completion_lease_until=lease_until,
                    updated_at=now,
                )
            )
        return result.rowcount == 1

    async def renew_completion(self, upload_id: str, *, owner: str, lease_until: datetime) -> bool:
        """Extend ``owner``'s completion lease; False when the upload is no longer completing under it."""
        async with self._engine.begin() as conn:
            result = await conn.execute(
                sa.update(uploads)
                .where(
                    uploads.c.id == upload_id,
                    uploads.c.state == UploadState.COMPLETING.value,
                    uploads.c.completion_owner == owner,
                )
                .values(completion_lease_until=lease_until)
            )
        return result.rowcount == 1

    async def release_completion(
        self, upload_id: str, *, owner: str | None, now: datetime, expired_only: bool
    ) -> bool:
        """Move a ``completing`` upload held by ``owner`` back to ``open``; True when it did.

        The owner itself releases after a failed join (``expired_only=False``). Anyone may release a
        completion whose lease ran out before ``now`` (``expired_only=True``): its completer stopped renewing,
        and a live completer that renewed in the meantime keeps it, because the condition is checked by the
        same statement that writes.
        """
        owned = uploads.c.completion_owner.is_(None) if owner is None else uploads.c.completion_owner == owner
        conditions = [uploads.c.id == upload_id, uploads.c.state == UploadState.COMPLETING.value, owned]
        if expired_only:
            conditions.append(
                sa.or_(
                    uploads.c.completion_lease_until.is_(None),
                    uploads.c.completion_lease_until <= now,
                )
            )
        async with self._engine.begin() as conn:
            result = await conn.execute(
                sa.update(uploads)
                .where(*conditions)
                .values(
                    state=UploadState.OPEN.value,
                    completion_owner=None,
                    completion_lease_until=None,
                    updated_at=now,
                )
            )
        return result.rowcount == 1

    async def list_completing_uploads(self, *, after_id: str, limit: int) -> list[UploadSession]:
        """A keyset page (by id) of the uploads in ``completing``, whatever their lease."""
        rows = await self._all(
            sa.select(uploads)
            .where(uploads.c.state == UploadState.COMPLETING.value, uploads.c.id > after_id)
            .order_by(uploads.c.id)
            .limit(limit)
        )
        return [_upload(row._mapping) for row in rows]

    async def extend_upload(self, upload_id: str, *, expires_at: datetime) -> bool:
        async with self._engine.begin() as conn:
            result = await conn.execute(
                sa.update(uploads).where(uploads.c.id == upload_id).values(expires_at=expires_at)
            )
        return result.rowcount == 1

    async def list_expired_uploads(self, *, now: datetime, limit: int) -> list[UploadSession]:
        """Open or completing uploads whose lease ran out, oldest first."""
        rows = await self._all(
            sa.select(uploads)
            .where(uploads.c.state.in_(_OPEN_STATES), uploads.c.expires_at <= now)
            .order_by(uploads.c.expires_at, uploads.c.id)
            .limit(limit)
        )
        return [_upload(row._mapping) for row in rows]

    async def delete_upload(self, upload_id: str) -> bool:
        """Delete the upload and (by cascade) its chunk rows."""
        async with self._engine.begin() as conn:
            result = await conn.execute(sa.delete(uploads).where(uploads.c.id == upload_id))
        return result.rowcount == 1

    # -- tokens ----------------------------------------------------------------------------------------------

    async def insert_token(self, record: TokenRecord, secret_hash: str) -> None:
        async with self._engine.begin() as conn:
            await conn.execute(
                sa.insert(tokens).values(
                    id=record.id,
                    namespace=record.namespace,
                    scopes=_scopes_text(record.scopes),
                    secret_hash=secret_hash,
                    description=record.description,
                    created_at=record.created_at,
                    expires_at=record.expires_at,
                    revoked_at=record.revoked_at,
                )
            )

    async def find_token(self, secret_hash: str) -> TokenRecord | None:
        """The token with this secret hash, revoked or expired ones included: the caller checks both."""
        async with self._reader.connect() as conn:
            row = (await conn.execute(sa.select(tokens).where(tokens.c.secret_hash == secret_hash))).first()
        return None if row is None else _token(row._mapping)

    async def list_tokens(self, namespace: str | None = None) -> list[TokenRecord]:
        """All tokens (revoked ones too), oldest first, optionally of one namespace."""
        query = sa.select(tokens).order_by(tokens.c.created_at, tokens.c.id)
        if namespace is not None:
            query = query.where(tokens.c.namespace == namespace)
        async with self._reader.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [_token(row._mapping) for row in rows]

    async def revoke_token(self, token_id: str, *, now: datetime) -> bool:
        """True when the token existed and was not revoked yet."""
        async with self._engine.begin() as conn:
            result = await conn.execute(
                sa.update(tokens)
                .where(tokens.c.id == token_id, tokens.c.revoked_at.is_(None))
                .values(revoked_at=now)
            )
        return result.rowcount == 1

    async def count_tokens(self, *, now: datetime | None = None) -> int:
        """Tokens that are neither revoked nor expired at ``now`` (default: the current time)."""
        moment = now if now is not None else datetime.now(UTC)
        async with self._reader.connect() as conn:
            count = await conn.scalar(
                sa.select(sa.func.count())
                .select_from(tokens)
                .where(
                    tokens.c.revoked_at.is_(None),
                    sa.or_(tokens.c.expires_at.is_(None), tokens.c.expires_at > moment),
                )
            )
        return int(count or 0)

    # -- audit -----------------------------------------------------------------------------------------------

    async def insert_audit(self, event: AuditEvent) -> None:
        async with self._engine.begin() as conn:
            await conn.execute(
                sa.insert(audit_events).values(
                    time=event.time,
                    actor=event.actor,
                    namespace=event.namespace,
                    action=event.action,
                    artifact_id=event.artifact_id,
                    size=event.size,
                    mime_type=event.mime_type,
                    duration_ms=event.duration_ms,
                    result=event.result,
                )
            )

    # -- garbage collection ----------------------------------------------------------------------------------

    async def expire_artifacts(self, *, now: datetime, limit: int) -> list[Artifact]:
        """Delete up to ``limit`` expired, unpinned artifacts and return them (call again until empty)."""
        batch = (
            sa.select(artifacts.c.id)
            .where(artifacts.c.expires_at <= now, artifacts.c.pinned == sa.false())
            .order_by(artifacts.c.expires_at, artifacts.c.id)
            .limit(limit)
        )
        if self.dialect == "postgresql":
            # Two cleanup runs on different replicas take disjoint batches instead of waiting on each other.
            batch = batch.with_for_update(skip_locked=True)
        async with self._engine.begin() as conn:
            rows = (
                await conn.execute(
                    sa.delete(artifacts)
                    .where(artifacts.c.id.in_(batch.scalar_subquery()))
                    .returning(*artifacts.c)
                )
            ).all()
        return [_artifact(row._mapping) for row in rows]

    async def mark_unreferenced_blobs(self, *, now: datetime) -> int:
        """Start the grace period of every live blob that no artifact references; returns how many."""
        async with self._engine.begin() as conn:
            result = await conn.execute(
                sa.update(blobs)
                .where(blobs.c.state == _LIVE, blobs.c.unreferenced_since.is_(None), ~_referenced())
                .values(unreferenced_since=now)
            )
        return result.rowcount

    async def claim_unreferenced_blobs(
        self, *, older_than: datetime, now: datetime, limit: int
    ) -> list[BlobRecord]:
        """Tombstone up to ``limit`` blobs unreferenced since ``older_than`` or earlier; return those claimed.

        Inclusive, so that a zero grace period (``older_than == now``) frees a blob marked in the same run.

        A tombstoned blob is never deduplicated onto again, so its object may be deleted once this returns.
        Candidates (marked before ``older_than``) are locked first, ``FOR UPDATE SKIP LOCKED`` on PostgreSQL
        so a commit holding ``FOR SHARE`` on one keeps it; only then are references checked, by a second
        statement whose fresh snapshot sees every reference committed before the locks were taken. Candidates
        found referenced (a mark that raced with a commit) get their mark cleared.
        """
        candidates = (
            sa.select(blobs.c.id)
            .where(blobs.c.state == _LIVE, blobs.c.unreferenced_since <= older_than)
            .order_by(blobs.c.unreferenced_since, blobs.c.id)
            .limit(limit)
        )
        if self.dialect == "postgresql":
            candidates = candidates.with_for_update(of=blobs, skip_locked=True)
        async with self._engine.begin() as conn:
            locked = list((await conn.execute(candidates)).scalars())
            if not locked:
                return []
            rows = (
                await conn.execute(
                    sa.update(blobs)
                    .where(blobs.c.id.in_(locked), blobs.c.state == _LIVE, ~_referenced())
                    .values(state=_TOMBSTONED, tombstoned_at=now)
                    .returning(*blobs.c)
                )
            ).all()
            if len(rows) < len(locked):
                await conn.execute(
                    sa.update(blobs)
                    .where(blobs.c.id.in_(locked), blobs.c.state == _LIVE)
                    .values(unreferenced_since=None)
                )
        return sorted((_blob_record(row._mapping) for row in rows), key=lambda record: record.id)

    async def list_tombstoned_blobs(self, *, limit: int) -> list[BlobRecord]:
        rows = await self._all(
            sa.select(blobs)
            .where(blobs.c.state == _TOMBSTONED)
            .order_by(blobs.c.tombstoned_at, blobs.c.id)
            .limit(limit)
        )
        return [_blob_record(row._mapping) for row in rows]

    async def drop_blob(self, blob_id: int) -> bool:
        """Delete a tombstoned, unreferenced blob row (after its object is gone); True when deleted."""
        async with self._engine.begin() as conn:
            result = await conn.execute(
                sa.delete(blobs).where(blobs.c.id == blob_id, blobs.c.state == _TOMBSTONED, ~_referenced())
            )
        return result.rowcount == 1

    async def known_storage_keys(self, keys: Sequence[str]) -> set[str]:
        """The subset of ``keys`` that some blob row (live or tombstoned) names: the rest are orphans."""
        known: set[str] = set()
        async with self._reader.connect() as conn:
            for start in range(0, len(keys), _KEY_BATCH):
                batch = list(keys[start : start + _KEY_BATCH])
                result = await conn.execute(
                    sa.select(blobs.c.storage_key).where(blobs.c.storage_key.in_(batch))
                )
                known.update(result.scalars())
        return known

    @contextlib.asynccontextmanager
    async def try_advisory_lock(self, name: str) -> AsyncIterator[bool]:
        """Yield True when this process now runs the singleton job ``name``, False when another one does.

        PostgreSQL: a session advisory lock on a connection held (in autocommit, so no transaction stays open)
        until the block ends; the server drops it if the process dies. SQLite: one server per data directory,
        so always True.
        """
        if self.dialect != "postgresql":
            yield True
            return
        key = _advisory_key(name)
        async with self._engine.connect() as conn:
            conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
            acquired = bool(await conn.scalar(sa.select(sa.func.pg_try_advisory_lock(key))))
            try:
                yield acquired
            finally:
                if acquired:
                    await conn.execute(sa.select(sa.func.pg_advisory_unlock(key)))

    async def list_finished_uploads(self, *, before: datetime, limit: int) -> list[UploadSession]:
        """Completed, aborted or expired uploads whose lease ran out before ``before``: rows left to purge."""
        rows = await self._all(
            sa.select(uploads)
            .where(uploads.c.state.not_in(_OPEN_STATES), uploads.c.expires_at <= before)
            .order_by(uploads.c.expires_at, uploads.c.id)
            .limit(limit)
        )
        return [_upload(row._mapping) for row in rows]

    async def known_staging_refs(self, refs: Sequence[str]) -> set[str]:
        """The subset of ``refs`` that some upload row names: the rest are staging leftovers."""
        known: set[str] = set()
        async with self._reader.connect() as conn:
            for start in range(0, len(refs), _KEY_BATCH):
                batch = list(refs[start : start + _KEY_BATCH])
                result = await conn.execute(
                    sa.select(uploads.c.staging_ref).where(uploads.c.staging_ref.in_(batch))
                )
                known.update(result.scalars())
        return known

    async def list_blobs(self, *, after_id: int, limit: int) -> list[BlobRecord]:
        """A keyset page of blob rows (any state) with ``id > after_id``, by id."""
        rows = await self._all(
            sa.select(blobs).where(blobs.c.id > after_id).order_by(blobs.c.id).limit(limit)
        )
        return [_blob_record(row._mapping) for row in rows]

    async def cleanup_due(self, *, now: datetime, older_than: datetime) -> dict[str, int]:
        """What a cleanup run at ``now`` with blobs unreferenced since ``older_than`` or earlier would act on.

        A blob not marked yet is marked at ``now`` by the run, so it is due too when ``now <= older_than``
        (a zero grace period)."""
        expired = sa.and_(artifacts.c.expires_at <= now, artifacts.c.pinned == sa.false())
        artifact_count_size = (sa.func.count(), sa.func.coalesce(sa.func.sum(artifacts.c.size), 0))
        unreferenced = sa.and_(blobs.c.state == _LIVE, ~_referenced())
        count_size = (sa.func.count(), sa.func.coalesce(sa.func.sum(blobs.c.size), 0))
        async with self._reader.begin() as conn:
            expired_row = (await conn.execute(sa.select(*artifact_count_size).where(expired))).one()
            uploads_due = await conn.scalar(
                sa.select(sa.func.count()).select_from(uploads).where(uploads.c.expires_at <= now)
            )
            unreferenced_row = (await conn.execute(sa.select(*count_size).where(unreferenced))).one()
            past_grace = blobs.c.unreferenced_since <= older_than
            if now <= older_than:
                past_grace = sa.or_(past_grace, blobs.c.unreferenced_since.is_(None))
            due_row = (await conn.execute(sa.select(*count_size).where(unreferenced, past_grace))).one()
            tombstoned = sa.select(*count_size).where(blobs.c.state == _TOMBSTONED)
            tombstoned_row = (await conn.execute(tombstoned)).one()
        return {
            "expired_artifacts": int(expired_row[0]),
            "expired_artifact_bytes": int(expired_row[1]),
            "expired_uploads": int(uploads_due or 0),
            "unreferenced_blobs": int(unreferenced_row[0]),
            "unreferenced_bytes": int(unreferenced_row[1]),
            "blobs_due": int(due_row[0]) + int(tombstoned_row[0]),
            "blob_bytes_due": int(due_row[1]) + int(tombstoned_row[1]),
            "tombstoned_blobs": int(tombstoned_row[0]),
        }

    # -- stats -----------------------------------------------------------------------------------------------

    async def stats(self, *, now: datetime) -> dict[str, int]:
        """Counts for ``blobstore stats``; stored bytes include tombstoned blobs not yet deleted."""
        async with self._reader.begin() as conn:
            artifact_row = (
                await conn.execute(
                    sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(artifacts.c.size), 0)).where(
                        _visible(now)
                    )
                )
            ).one()
            blob_row = (
                await conn.execute(sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(blobs.c.size), 0)))
            ).one()
            open_uploads = await conn.scalar(
                sa.select(sa.func.count()).select_from(uploads).where(uploads.c.state.in_(_OPEN_STATES))
            )
        return {
            "artifacts": int(artifact_row[0]),
            "blobs": int(blob_row[0]),
            "bytes_stored": int(blob_row[1]),
            "bytes_logical": int(artifact_row[1]),
            "open_uploads": int(open_uploads or 0),
        }

    # -- tus upload tails ------------------------------------------------------------------------------------

    async def get_tail(self, upload_id: str) -> UploadTail | None:
        async with self._reader.connect() as conn:
            row = (
                await conn.execute(sa.select(upload_tails).where(upload_tails.c.upload_id == upload_id))
            ).first()
        if row is None:
            return None
        mapping = row._mapping
        return UploadTail(
            upload_id=mapping["upload_id"],
            offset=int(mapping["offset"]),
            data=bytes(mapping["data"]),
            updated_at=mapping["updated_at"],
        )

    async def put_tail(
        self,
        upload_id: str,
        *,
        expected_end: int | None,
        offset: int,
        data: bytes,
        chunk_size: int,
        now: datetime,
    ) -> bool:
        """Store ``data`` as the tail starting at ``offset``, compare-and-set: True only when the stored tail
        still ends at ``expected_end`` (None: no tail stored yet) and no staged chunk starts at or past
        ``offset``. Every successful write moves the end forward, so of two writers that read the same tail
        only one can win.
        """
        first_free = offset // chunk_size
        async with self._engine.begin() as conn:
            overtaken = await conn.scalar(
                sa.select(
                    sa.exists().where(
                        upload_chunks.c.upload_id == upload_id, upload_chunks.c.index >= first_free
                    )
                )
            )
            if overtaken:
                return False
            values = {"offset": offset, "data": data, "updated_at": now}
            if expected_end is None:
                result = await conn.execute(
                    self._insert(upload_tails)
                    .values(upload_id=upload_id, **values)
                    .on_conflict_do_nothing(index_elements=["upload_id"])
                )
            else:
                result = await conn.execute(
                    sa.update(upload_tails)
                    .where(
                        upload_tails.c.upload_id == upload_id,
                        upload_tails.c.offset + sa.func.length(upload_tails.c.data) == expected_end,
                    )
                    .values(**values)
                )
        return result.rowcount == 1

    async def delete_tail(self, upload_id: str) -> None:
        async with self._engine.begin() as conn:
            await conn.execute(sa.delete(upload_tails).where(upload_tails.c.upload_id == upload_id))

    # -- helpers ---------------------------------------------------------------------------------------------

    def _insert(self, table: sa.Table) -> postgresql.Insert | sqlite.Insert:
        if self.dialect == "postgresql":
            return postgresql.insert(table)
        return sqlite.insert(table)


def sqlite_file(database_url: str | sa.URL) -> Path | None:
    """The database file of a SQLite URL; None for PostgreSQL and in-memory SQLite."""
    url = make_url(database_url)
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    return Path(url.database)


def _visible(now: datetime) -> sa.ColumnElement[bool]:
    return sa.or_(
        artifacts.c.pinned == sa.true(),
        artifacts.c.expires_at.is_(None),
        artifacts.c.expires_at > now,
    )


def _referenced() -> sa.Exists:
    return sa.exists().where(artifacts.c.blob_id == blobs.c.id)


def _advisory_key(name: str) -> int:
    # Stable across processes and Python versions, unlike hash().
    digest = hashlib.sha256(f"blobstore:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _scopes_text(scopes: frozenset[Scope]) -> str:
    return ",".join(sorted(scope.value for scope in scopes))


def _blob_record(row: Mapping[Any, Any]) -> BlobRecord:
    # Columns chunk_size / chunk_xxh3 hold the integrity blocks (named before the upload chunk had its own).
    block_text: str = row["chunk_xxh3"]
    return BlobRecord(
        id=int(row["id"]),
        info=BlobInfo(
            key=row["storage_key"],
            size=int(row["size"]),
            sha256=row["sha256"],
            block_size=int(row["chunk_size"]),
            block_xxh3=tuple(block_text.split(",")) if block_text else (),
        ),
        state=row["state"],
        created_at=row["created_at"],
    )


def _artifact(row: Mapping[Any, Any]) -> Artifact:
    return Artifact(
        id=row["id"],
        namespace=row["namespace"],
        name=row["name"],
        mime_type=row["mime_type"],
        size=int(row["size"]),
        sha256=row["sha256"],
        blob_id=int(row["blob_id"]),
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        pinned=bool(row["pinned"]),
        metadata=dict(row["user_metadata"]),
        media=dict(row["media"]),
    )


def _upload(row: Mapping[Any, Any]) -> UploadSession:
    return UploadSession(
        id=row["id"],
        namespace=row["namespace"],
        name=row["name"],
        mime_type=row["mime_type"],
        declared_size=row["declared_size"],
        declared_sha256=row["declared_sha256"],
        chunk_size=int(row["chunk_size"]),
        staging_ref=row["staging_ref"],
        state=UploadState(row["state"]),
        ttl_seconds=row["ttl_seconds"],
        metadata=dict(row["user_metadata"]),
        protocol=row["protocol"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        expires_at=row["expires_at"],
        artifact_id=row["artifact_id"],
        completion_owner=row["completion_owner"],
        completion_lease_until=row["completion_lease_until"],
    )


def _chunk(row: Mapping[Any, Any]) -> ChunkRecord:
    return ChunkRecord(
        upload_id=row["upload_id"],
        index=int(row["index"]),
        size=int(row["size"]),
        sha256=row["sha256"],
        xxh3=row["xxh3"],
        received_at=row["received_at"],
    )


def _token(row: Mapping[Any, Any]) -> TokenRecord:
    scopes_text: str = row["scopes"]
    return TokenRecord(
        id=row["id"],
        namespace=row["namespace"],
        scopes=frozenset(Scope(value) for value in scopes_text.split(",") if value),
        description=row["description"],
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        revoked_at=row["revoked_at"],
    )

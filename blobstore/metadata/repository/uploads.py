"""Upload sessions and their chunk rows: creation under the open-uploads limit, chunk records, the state
machine and the completion lease."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import anyio
import anyio.to_thread
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from blobstore.errors import NotFound, TooManyUploads
from blobstore.metadata.repository import rows
from blobstore.metadata.repository.base import OPEN_STATES, RepositoryBase
from blobstore.metadata.repository.group_commit import GroupCommit
from blobstore.metadata.tables import upload_chunks, uploads
from blobstore.models import ChunkRecord, UploadSession, UploadState


class UploadRepository(RepositoryBase):
    """Upload sessions, their chunk rows and their completion lease."""

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
                    .where(uploads.c.namespace == session.namespace, uploads.c.state.in_(OPEN_STATES))
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

    def __init__(self, engine: AsyncEngine, **options: Any) -> None:
        super().__init__(engine, **options)
        # Chunks of one upload arrive in parallel: their records share transactions (and WAL syncs) on SQLite.
        writer = self._sync_writer
        self._chunk_records = GroupCommit[ChunkRecord](writer) if writer is not None else None

    async def get_upload(self, namespace: str, upload_id: str) -> UploadSession | None:
        if self._lookups is not None:
            found: UploadSession | None = await anyio.to_thread.run_sync(
                self._lookups.upload, namespace, upload_id, limiter=self._sync_limiter
            )
            return found
        async with self._reader.connect() as conn:
            row = (
                await conn.execute(
                    sa.select(uploads).where(uploads.c.id == upload_id, uploads.c.namespace == namespace)
                )
            ).first()
        return None if row is None else rows.upload(row._mapping)

    async def count_open_uploads(self, namespace: str) -> int:
        """Uploads of the namespace still holding staging space: open or completing."""
        async with self._reader.connect() as conn:
            count = await conn.scalar(
                sa.select(sa.func.count())
                .select_from(uploads)
                .where(uploads.c.namespace == namespace, uploads.c.state.in_(OPEN_STATES))
            )
        return int(count or 0)

    async def count_all_open_uploads(self) -> int:
        """Uploads of every namespace still holding staging space (the ``blobstore_uploads_open`` gauge)."""
        async with self._reader.connect() as conn:
            count = await conn.scalar(
                sa.select(sa.func.count()).select_from(uploads).where(uploads.c.state.in_(OPEN_STATES))
            )
        return int(count or 0)

    async def record_chunk(self, chunk: ChunkRecord) -> ChunkRecord:
        """Insert the chunk unless its index is already recorded; return the row stored for that index.

        Raises :class:`NotFound` when the upload does not exist. The caller compares the returned checksums
        with its own to tell a harmless resend from a conflict.
        """
        record = functools.partial(self._record_chunk, chunk=chunk)
        if self._chunk_records is not None:
            return await self._chunk_records.run(record)
        async with self._engine.begin() as conn:
            return await conn.run_sync(record)

    def _record_chunk(self, conn: sa.Connection, *, chunk: ChunkRecord) -> ChunkRecord:
        bumped = conn.execute(
            sa.update(uploads).where(uploads.c.id == chunk.upload_id).values(updated_at=chunk.received_at)
        )
        if bumped.rowcount == 0:
            raise NotFound("upload not found")
        conn.execute(
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
        row = conn.execute(
            sa.select(upload_chunks).where(
                upload_chunks.c.upload_id == chunk.upload_id, upload_chunks.c.index == chunk.index
            )
        ).one()
        return rows.chunk(row._mapping)

    async def list_chunks(self, upload_id: str) -> list[ChunkRecord]:
        selected = await self._all(
            sa.select(upload_chunks)
            .where(upload_chunks.c.upload_id == upload_id)
            .order_by(upload_chunks.c.index)
        )
        return [rows.chunk(row._mapping) for row in selected]

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
        return await self._set_if(
            uploads.c.id == upload_id, uploads.c.state.in_([state.value for state in from_states]), **values
        )

    async def _set_if(self, *conditions: sa.ColumnElement[bool], **values: Any) -> bool:
        """Compare-and-set: write ``values`` to the upload row meeting ``conditions``; True when one did."""
        async with self._engine.begin() as conn:
            result = await conn.execute(sa.update(uploads).where(*conditions).values(**values))
        return result.rowcount == 1

    async def begin_completion(
        self, upload_id: str, *, owner: str, lease_until: datetime, now: datetime
    ) -> bool:
        """Move the upload from ``open`` to ``completing`` under a completion lease held by ``owner``; True
        only for the one caller whose compare-and-set matched."""
        return await self._set_if(
            uploads.c.id == upload_id,
            uploads.c.state == UploadState.OPEN.value,
            state=UploadState.COMPLETING.value,
            completion_owner=owner,
            completion_lease_until=lease_until,
            updated_at=now,
        )

    async def renew_completion(self, upload_id: str, *, owner: str, lease_until: datetime) -> bool:
        """Extend ``owner``'s completion lease; False when the upload is no longer completing under it."""
        return await self._set_if(
            uploads.c.id == upload_id,
            uploads.c.state == UploadState.COMPLETING.value,
            uploads.c.completion_owner == owner,
            completion_lease_until=lease_until,
        )

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
        return await self._set_if(
            *conditions,
            state=UploadState.OPEN.value,
            completion_owner=None,
            completion_lease_until=None,
            updated_at=now,
        )

    async def list_completing_uploads(self, *, after_id: str, limit: int) -> list[UploadSession]:
        """A keyset page (by id) of the uploads in ``completing``, whatever their lease."""
        selected = await self._all(
            sa.select(uploads)
            .where(uploads.c.state == UploadState.COMPLETING.value, uploads.c.id > after_id)
            .order_by(uploads.c.id)
            .limit(limit)
        )
        return [rows.upload(row._mapping) for row in selected]

    async def list_expired_uploads(self, *, now: datetime, limit: int) -> list[UploadSession]:
        """Open or completing uploads whose lease ran out, oldest first."""
        return await self._lapsed_uploads(uploads.c.state.in_(OPEN_STATES), before=now, limit=limit)

    async def delete_upload(self, upload_id: str) -> bool:
        """Delete the upload and (by cascade) its chunk rows."""
        async with self._engine.begin() as conn:
            result = await conn.execute(sa.delete(uploads).where(uploads.c.id == upload_id))
        return result.rowcount == 1

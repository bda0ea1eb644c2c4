"""Garbage collection: expiring artifacts, the mark / claim / drop cycle of unreferenced blobs, the orphan
and leftover sweeps' lookups, finished uploads to purge, and the singleton-job lock of a cleanup run."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from datetime import datetime

import sqlalchemy as sa

from blobstore.metadata.repository import rows
from blobstore.metadata.repository.base import (
    LIVE,
    OPEN_STATES,
    TOMBSTONED,
    RepositoryBase,
    advisory_key,
)
from blobstore.metadata.tables import artifacts, blobs, renditions, uploads
from blobstore.models import Artifact, BlobRecord, UploadSession

_KEY_BATCH = 500
"""Keys per ``IN`` list of a sweep lookup."""


class CollectionRepository(RepositoryBase):
    """What the cleanup job reads, claims and deletes."""

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
            selected = (
                await conn.execute(
                    sa.delete(artifacts)
                    .where(artifacts.c.id.in_(batch.scalar_subquery()))
                    .returning(*artifacts.c)
                )
            ).all()
        return [rows.artifact(row._mapping) for row in selected]

    async def mark_unreferenced_blobs(self, *, now: datetime) -> int:
        """Start the grace period of every live blob that no artifact references; returns how many."""
        async with self._engine.begin() as conn:
            result = await conn.execute(
                sa.update(blobs)
                .where(blobs.c.state == LIVE, blobs.c.unreferenced_since.is_(None), ~_referenced())
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
            .where(blobs.c.state == LIVE, blobs.c.unreferenced_since <= older_than)
            .order_by(blobs.c.unreferenced_since, blobs.c.id)
            .limit(limit)
        )
        if self.dialect == "postgresql":
            candidates = candidates.with_for_update(of=blobs, skip_locked=True)
        async with self._engine.begin() as conn:
            locked = list((await conn.execute(candidates)).scalars())
            if not locked:
                return []
            selected = (
                await conn.execute(
                    sa.update(blobs)
                    .where(blobs.c.id.in_(locked), blobs.c.state == LIVE, ~_referenced())
                    .values(state=TOMBSTONED, tombstoned_at=now)
                    .returning(*blobs.c)
                )
            ).all()
            if len(selected) < len(locked):
                await conn.execute(
                    sa.update(blobs)
                    .where(blobs.c.id.in_(locked), blobs.c.state == LIVE)
                    .values(unreferenced_since=None)
                )
        return sorted((rows.blob_record(row._mapping) for row in selected), key=lambda record: record.id)

    async def list_tombstoned_blobs(self, *, limit: int) -> list[BlobRecord]:
        selected = await self._all(
            sa.select(blobs)
            .where(blobs.c.state == TOMBSTONED)
            .order_by(blobs.c.tombstoned_at, blobs.c.id)
            .limit(limit)
        )
        return [rows.blob_record(row._mapping) for row in selected]

    async def drop_blob(self, blob_id: int) -> bool:
        """Delete a tombstoned, unreferenced blob row (after its object is gone); True when deleted."""
        async with self._engine.begin() as conn:
            result = await conn.execute(
                sa.delete(blobs).where(blobs.c.id == blob_id, blobs.c.state == TOMBSTONED, ~_referenced())
            )
        return result.rowcount == 1

    async def known_storage_keys(self, keys: Sequence[str]) -> set[str]:
        """The subset of ``keys`` that some blob row (live or tombstoned) names: the rest are orphans."""
        return await self._known(blobs.c.storage_key, keys)

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
        key = advisory_key(name)
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
        return await self._lapsed_uploads(uploads.c.state.not_in(OPEN_STATES), before=before, limit=limit)

    async def known_staging_refs(self, refs: Sequence[str]) -> set[str]:
        """The subset of ``refs`` that some upload row names: the rest are staging leftovers."""
        return await self._known(uploads.c.staging_ref, refs)

    async def _known(self, column: sa.Column[str], values: Sequence[str]) -> set[str]:
        """The subset of ``values`` found in ``column``, looked up in batches."""
        known: set[str] = set()
        async with self._reader.connect() as conn:
            for start in range(0, len(values), _KEY_BATCH):
                batch = list(values[start : start + _KEY_BATCH])
                known.update((await conn.execute(sa.select(column).where(column.in_(batch)))).scalars())
        return known

    async def cleanup_due(self, *, now: datetime, older_than: datetime) -> dict[str, int]:
        """What a cleanup run at ``now`` with blobs unreferenced since ``older_than`` or earlier would act on.

        A blob not marked yet is marked at ``now`` by the run, so it is due too when ``now <= older_than``
        (a zero grace period)."""
        expired = sa.and_(artifacts.c.expires_at <= now, artifacts.c.pinned == sa.false())
        artifact_count_size = (sa.func.count(), sa.func.coalesce(sa.func.sum(artifacts.c.size), 0))
        unreferenced = sa.and_(blobs.c.state == LIVE, ~_referenced())
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
            tombstoned = sa.select(*count_size).where(blobs.c.state == TOMBSTONED)
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


def _referenced() -> sa.ColumnElement[bool]:
    """Some artifact or rendition uses the blob: the sweep must keep it."""
    return sa.or_(
        sa.exists().where(artifacts.c.blob_id == blobs.c.id),
        sa.exists().where(renditions.c.blob_id == blobs.c.id),
    )

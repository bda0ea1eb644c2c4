"""Rendition rows: media views kept as blobs, found by key, kept alive as long as their sources, and deleted
by cleanup once their sources are gone."""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from blobstore.metadata.repository import rows
from blobstore.metadata.repository.base import RepositoryBase, visible
from blobstore.metadata.repository.blob_refs import attach_blob
from blobstore.metadata.tables import artifacts, blobs, renditions
from blobstore.models import BlobInfo, NewRendition, Rendition

_ATTEMPTS = 3


class _Raced(Exception):
    """Another transaction committed a rendition of this key after ours looked: roll back and look again."""


class RenditionRepository(RepositoryBase):
    """Renditions by key. A key is a digest of the source's content, so a rendition belongs to no namespace:
    the edges reach one only through an artifact the caller may read."""

    async def get_rendition(self, key: str, *, now: datetime) -> Rendition | None:
        """The live rendition of ``key`` (not past its expiry) with its blob, or None."""
        row = await self._first(_with_blob().where(renditions.c.key == key, _live(now)))
        return None if row is None else _rendition(row)

    async def commit_rendition(self, *, blob: BlobInfo, rendition: NewRendition, now: datetime) -> Rendition:
        """Record ``rendition`` over ``blob``'s content (deduplicating onto a live blob, like an artifact),
        and return what the key now holds.

        When a live rendition of the key exists already (another replica made the same view meanwhile),
        that one is kept, alive at least until ``rendition.expires_at``, and returned. Either way the caller
        deletes its own generation unless the returned rendition's blob is it. An expired row of the key is
        replaced.
        """
        for _ in range(_ATTEMPTS):
            try:
                async with self._engine.begin() as conn:
                    return await conn.run_sync(self._commit, blob, rendition, now)
            except _Raced:
                continue
        found = await self.get_rendition(rendition.key, now=now)
        if found is None:
            raise AssertionError("a rendition committed by another transaction vanished at once")
        return found

    def _commit(
        self, conn: sa.Connection, blob: BlobInfo, rendition: NewRendition, now: datetime
    ) -> Rendition:
        existing = self._live_row(conn, rendition.key, now)
        if existing is not None:
            _extend(conn, rendition.key, rendition.expires_at)
            return self._live_row(conn, rendition.key, now) or existing
        record, _ = attach_blob(conn, blob, created_at=rendition.created_at)
        values = {
            "key": rendition.key,
            "source_sha256": rendition.source_sha256,
            "blob_id": record.id,
            "mime_type": rendition.mime_type,
            "meta": rendition.meta,
            "size": record.info.size,
            "created_at": rendition.created_at,
            "expires_at": rendition.expires_at,
        }
        upsert = self._insert(renditions).values(values)
        stored = conn.execute(
            upsert.on_conflict_do_update(
                index_elements=["key"],
                set_={name: upsert.excluded[name] for name in values if name != "key"},
                # Only an expired row is replaced: a live one was committed by a transaction that raced ours.
                where=renditions.c.expires_at <= now,
            ).returning(renditions.c.key)
        ).first()
        if stored is None:
            raise _Raced()
        found = self._live_row(conn, rendition.key, now)
        if found is None:
            raise AssertionError("a rendition just committed is not live")
        return found

    def _live_row(self, conn: sa.Connection, key: str, now: datetime) -> Rendition | None:
        row = conn.execute(_with_blob().where(renditions.c.key == key, _live(now))).first()
        return None if row is None else _rendition(row)

    async def extend_rendition(self, key: str, expires_at: datetime | None) -> None:
        """Keep the rendition of ``key`` alive at least until ``expires_at`` (for good when None): another
        artifact over the same content lives longer than those it was made for."""
        async with self._engine.begin() as conn:
            await conn.run_sync(_extend, key, expires_at)

    async def remove_renditions(self, *, now: datetime, limit: int) -> list[Rendition]:
        """Delete up to ``limit`` renditions that are past their expiry or whose source content no live
        artifact holds any more (deleted, expired, or never committed), and return them (call again until
        fewer come back). Their blobs are then unreferenced unless something else uses them, and the blob
        sweep frees them after the grace period."""
        batch = sa.select(renditions.c.key).where(_gone(now)).order_by(renditions.c.key).limit(limit)
        if self.dialect == "postgresql":
            # Two cleanup runs on different replicas take disjoint batches instead of waiting on each other.
            batch = batch.with_for_update(of=renditions, skip_locked=True)
        async with self._engine.begin() as conn:
            keys = list((await conn.execute(batch)).scalars())
            if not keys:
                return []
            removed = (await conn.execute(_with_blob().where(renditions.c.key.in_(keys)))).all()
            await conn.execute(sa.delete(renditions).where(renditions.c.key.in_(keys)))
        return [_rendition(row) for row in removed]

    async def trim_renditions(self, *, max_bytes: int, limit: int) -> list[Rendition]:
        """Delete the oldest renditions (by when they were made), up to ``limit`` of them, until the sizes of
        those left add up to ``max_bytes`` or less, and return them (call again until none come back)."""
        oldest = (
            sa.select(renditions.c.key, renditions.c.size)
            .order_by(renditions.c.created_at, renditions.c.key)
            .limit(limit)
        )
        if self.dialect == "postgresql":
            oldest = oldest.with_for_update(skip_locked=True)
        async with self._engine.begin() as conn:
            total = int(
                await conn.scalar(sa.select(sa.func.coalesce(sa.func.sum(renditions.c.size), 0))) or 0
            )
            excess = total - max_bytes
            if excess <= 0:
                return []
            keys: list[str] = []
            for key, size in (await conn.execute(oldest)).all():
                if excess <= 0:
                    break
                keys.append(key)
                excess -= int(size)
            removed = (await conn.execute(_with_blob().where(renditions.c.key.in_(keys)))).all()
            await conn.execute(sa.delete(renditions).where(renditions.c.key.in_(keys)))
        return [_rendition(row) for row in removed]

    async def renditions_due(self, *, now: datetime) -> tuple[int, int]:
        """How many renditions :meth:`remove_renditions` would delete at ``now``, and their bytes."""
        async with self._reader.connect() as conn:
            row = (
                await conn.execute(
                    sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(renditions.c.size), 0)).where(
                        _gone(now)
                    )
                )
            ).one()
        return int(row[0]), int(row[1])


def _live(now: datetime) -> sa.ColumnElement[bool]:
    return sa.or_(renditions.c.expires_at.is_(None), renditions.c.expires_at > now)


def _gone(now: datetime) -> sa.ColumnElement[bool]:
    source_lives = sa.exists().where(artifacts.c.sha256 == renditions.c.source_sha256, visible(now))
    return sa.or_(renditions.c.expires_at <= now, ~source_lives)


def _extend(conn: sa.Connection, key: str, expires_at: datetime | None) -> None:
    shorter: sa.ColumnElement[bool] = renditions.c.expires_at.is_not(None)
    if expires_at is not None:
        shorter = sa.and_(shorter, renditions.c.expires_at < expires_at)
    conn.execute(sa.update(renditions).where(renditions.c.key == key, shorter).values(expires_at=expires_at))


@functools.cache
def _blob_labels() -> tuple[tuple[str, str], ...]:
    return tuple((column.name, f"b_{column.name}") for column in blobs.c)


def _with_blob() -> sa.Select[Any]:
    return sa.select(renditions, *(blobs.c[name].label(label) for name, label in _blob_labels())).join(
        blobs, blobs.c.id == renditions.c.blob_id
    )


def _rendition(row: sa.Row[Any]) -> Rendition:
    mapping = row._mapping
    return rows.rendition(mapping, rows.blob_record({name: mapping[label] for name, label in _blob_labels()}))

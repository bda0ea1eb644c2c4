"""What every part of the metadata repository shares: the engines, the read helpers, the disk reserve, the
per-namespace lock, dialect-specific inserts and the row predicates more than one part uses.

Writes run in ``BEGIN IMMEDIATE`` transactions on SQLite (one writer at a time) and in read-committed
transactions with explicit row locks on PostgreSQL. Reads on SQLite start deferred transactions, which in WAL
mode never wait for a writer.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Self, TypeVar

import anyio
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from blobstore.diskspace import SpaceReserve, check_free
from blobstore.errors import BlobstoreError, StorageFull, StorageUnavailable
from blobstore.metadata.engine import (
    READ_ONLY,
    create_engine,
    create_sqlite_read_engine,
    create_sqlite_write_engine,
    sqlite_file,
)
from blobstore.metadata.repository import rows
from blobstore.metadata.repository.sqlite_reads import SqliteLookups
from blobstore.metadata.tables import artifacts, uploads
from blobstore.models import UploadSession, UploadState

T = TypeVar("T")

logger = logging.getLogger("blobstore.metadata")

LIVE = "live"
TOMBSTONED = "tombstoned"
OPEN_STATES = (UploadState.OPEN.value, UploadState.COMPLETING.value)
"""Upload states that still hold staging space."""


class RepositoryBase:
    """One :class:`AsyncEngine` and the helpers every statement of the repository runs through."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        sync_reader: sa.Engine | None = None,
        sync_writer: sa.Engine | None = None,
        reserve: SpaceReserve | None = None,
    ) -> None:
        self._engine = engine
        self._reader = engine.execution_options(**{READ_ONLY: True})
        self._sync_reader = sync_reader
        self._sync_writer = sync_writer
        database = None if sync_reader is None else sqlite_file(sync_reader.url)
        self._lookups = None if database is None else SqliteLookups(database)
        self._sync_limiter = anyio.CapacityLimiter(8)
        self._reserve = reserve

    @classmethod
    async def open(cls, database_url: str, *, reserve: SpaceReserve | None = None) -> Self:
        """The repository over ``database_url``; ``reserve`` is the disk reserve :meth:`freeing` releases."""
        return cls(
            create_engine(database_url),
            sync_reader=create_sqlite_read_engine(database_url),
            sync_writer=create_sqlite_write_engine(database_url),
            reserve=reserve,
        )

    async def close(self) -> None:
        await self._engine.dispose()
        if self._lookups is not None:
            self._lookups.close()
        for sync_engine in (self._sync_reader, self._sync_writer):
            if sync_engine is not None:
                sync_engine.dispose()

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

    # -- reads -----------------------------------------------------------------------------------------------

    async def _first(
        self, statement: sa.Select[Any], parameters: Mapping[str, Any] | None = None
    ) -> sa.Row[Any] | None:
        """The first row of a read-only statement, on the fast synchronous SQLite path where there is one."""
        if self._sync_reader is None:
            async with self._reader.connect() as conn:
                first: sa.Row[Any] | None = (await conn.execute(statement, parameters)).first()
                return first
        row: sa.Row[Any] | None = await anyio.to_thread.run_sync(
            self._first_sync, statement, parameters, limiter=self._sync_limiter
        )
        return row

    async def _all(self, statement: sa.Select[Any]) -> Sequence[sa.Row[Any]]:
        """Every row of a read-only statement."""
        async with self._reader.connect() as conn:
            rows: Sequence[sa.Row[Any]] = (await conn.execute(statement)).all()
            return rows

    async def _lapsed_uploads(
        self, in_states: sa.ColumnElement[bool], *, before: datetime, limit: int
    ) -> list[UploadSession]:
        """Up to ``limit`` uploads ``in_states`` whose lease ran out before ``before``, oldest first."""
        selected = await self._all(
            sa.select(uploads)
            .where(in_states, uploads.c.expires_at <= before)
            .order_by(uploads.c.expires_at, uploads.c.id)
            .limit(limit)
        )
        return [rows.upload(row._mapping) for row in selected]

    def _first_sync(
        self, statement: sa.Select[Any], parameters: Mapping[str, Any] | None = None
    ) -> sa.Row[Any] | None:
        assert self._sync_reader is not None
        with self._sync_reader.connect() as conn:
            return conn.execute(statement, parameters).first()

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

    # -- writes ----------------------------------------------------------------------------------------------

    async def _lock_namespace(self, conn: AsyncConnection, purpose: str, namespace: str) -> None:
        """Serialise the rest of this transaction with every other one that locks ``(purpose, namespace)``.

        SQLite's ``BEGIN IMMEDIATE`` already serialises all writers; PostgreSQL takes a transaction-scoped
        advisory lock, released at commit or rollback.
        """
        statement = self._namespace_lock(purpose, namespace)
        if statement is not None:
            await conn.execute(statement)

    def _namespace_lock(self, purpose: str, namespace: str) -> sa.Select[Any] | None:
        """The statement :meth:`_lock_namespace` runs; None where the transaction itself serialises."""
        if self.dialect != "postgresql":
            return None
        return sa.select(sa.func.pg_advisory_xact_lock(advisory_key(f"{purpose}:{namespace}")))

    def _insert(self, table: sa.Table) -> postgresql.Insert | sqlite.Insert:
        """An INSERT with ``on_conflict_do_nothing`` in this database's dialect."""
        if self.dialect == "postgresql":
            return postgresql.insert(table)
        return sqlite.insert(table)


def visible(now: datetime | sa.BindParameter[datetime]) -> sa.ColumnElement[bool]:
    """The artifact is not expired at ``now`` (or pinned)."""
    return sa.or_(
        artifacts.c.pinned == sa.true(),
        artifacts.c.expires_at.is_(None),
        artifacts.c.expires_at > now,
    )


def newest_first(query: sa.Select[Any], after: tuple[datetime, str] | None, limit: int) -> sa.Select[Any]:
    """``query`` over artifacts as a keyset page: ``(created_at, id)`` descending, strictly after (older than)
    the ``after`` position."""
    if after is not None:
        after_time, after_id = after
        query = query.where(
            # Implied by the OR below, but it is what lets SQLite seek the index to the cursor instead of
            # walking every newer row (with bound parameters it does not derive a range from the OR).
            artifacts.c.created_at <= after_time,
            sa.or_(
                artifacts.c.created_at < after_time,
                sa.and_(artifacts.c.created_at == after_time, artifacts.c.id < after_id),
            ),
        )
    return query.order_by(artifacts.c.created_at.desc(), artifacts.c.id.desc()).limit(limit)


def advisory_key(name: str) -> int:
    """The PostgreSQL advisory lock key of ``name``."""
    # Stable across processes and Python versions, unlike hash().
    digest = hashlib.sha256(f"blobstore:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)

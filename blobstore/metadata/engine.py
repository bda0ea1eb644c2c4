"""Async engines for the two supported databases, with the per-connection settings each needs.

SQLite: pysqlite's own transaction handling is switched off and SQLAlchemy emits ``BEGIN`` itself (the
pattern in SQLAlchemy's SQLite documentation), so every transaction is ``BEGIN IMMEDIATE``: writers take the
write lock up front and queue on ``busy_timeout`` instead of failing with "database is locked" half-way
through. A reader that opts in with :data:`READ_ONLY` gets a deferred ``BEGIN``, so reads never wait for a
writer (WAL).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

SQLITE_BUSY_TIMEOUT_MS = 30_000
"""How long a writer waits for the SQLite write lock before the statement fails."""

READ_ONLY = "blobstore_read_only"
"""Execution option: the transaction only reads, so on SQLite it starts deferred rather than immediate."""

SUPPORTED_DRIVERS = ("sqlite+aiosqlite", "postgresql+asyncpg")


def create_engine(database_url: str, **kwargs: Any) -> AsyncEngine:
    """An :class:`AsyncEngine` for ``sqlite+aiosqlite:///path`` or ``postgresql+asyncpg://…``."""
    try:
        url = make_url(database_url)
    except sa.exc.ArgumentError:
        raise ValueError(
            "BLOBSTORE_DATABASE_URL is not a database URL; expected sqlite+aiosqlite:///path "
            "or postgresql+asyncpg://user@host/db"
        ) from None
    if url.drivername not in SUPPORTED_DRIVERS:
        raise ValueError(
            f"BLOBSTORE_DATABASE_URL uses driver {url.drivername!r}; supported: "
            f"{', '.join(SUPPORTED_DRIVERS)}"
        )
    if url.get_backend_name() == "sqlite":
        if url.database and url.database != ":memory:":
            _create_private_file(Path(url.database))
        engine = create_async_engine(url, **kwargs)
        _configure_sqlite(engine)
        return engine
    kwargs.setdefault("pool_pre_ping", True)
    return create_async_engine(url, **kwargs)


def create_sqlite_read_engine(database_url: str) -> sa.Engine | None:
    """A synchronous, query-only engine over the same SQLite file, for the hot single-row reads.

    An async read through aiosqlite costs several thread hops (begin, execute, fetch, rollback, each one a
    round trip to the driver's thread); the same statement on a plain ``sqlite3`` connection inside one
    worker-thread call is about seven times faster. Returns None for anything but a SQLite file.
    """
    url = make_url(database_url)
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    engine = sa.create_engine(
        url.set(drivername="sqlite+pysqlite"), connect_args={"check_same_thread": False}
    )

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Autocommit: each SELECT is its own snapshot in WAL mode and never waits for a writer.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
            cursor.execute("PRAGMA query_only=ON")
        finally:
            cursor.close()

    return engine


def _create_private_file(path: Path) -> None:
    """Create the database file 0600 before SQLite does.

    SQLite gives its -wal and -shm files the database file's mode, and the metadata (names, digests, token
    hashes) is nobody else's business.
    """
    if not path.parent.is_dir():
        return  # let SQLite report the missing directory as it would
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def _configure_sqlite(engine: AsyncEngine) -> None:
    @sa.event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Leave transaction control to the "begin" hook below; pysqlite would otherwise emit a deferred BEGIN
        # lazily before the first write, which is where "database is locked" upgrades come from.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
            cursor.execute("PRAGMA foreign_keys=ON")
            # NORMAL would let a power loss roll back a commit the client was already told about, leaving
            # its freshly fsynced blob an orphan; FULL syncs the WAL on every commit.
            cursor.execute("PRAGMA synchronous=FULL")
        finally:
            cursor.close()

    @sa.event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: sa.Connection) -> None:
        if conn.get_execution_options().get(READ_ONLY):
            conn.exec_driver_sql("BEGIN")
        else:
            conn.exec_driver_sql("BEGIN IMMEDIATE")

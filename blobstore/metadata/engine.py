"""Async engines for the two supported databases, with the per-connection settings each needs.

SQLite: pysqlite's own transaction handling is switched off and SQLAlchemy emits ``BEGIN`` itself (the
pattern in SQLAlchemy's SQLite documentation), so every transaction is ``BEGIN IMMEDIATE``: writers take the
write lock up front and queue on ``busy_timeout`` instead of failing with "database is locked" half-way
through. A reader that opts in with :data:`READ_ONLY` gets a deferred ``BEGIN``, so reads never wait for a
writer (WAL).

Both engines translate "out of space" from the database into the error catalogue's ``storage_full`` (and other
resource exhaustion into ``storage_unavailable``) where the error arises, so no caller sees a driver error for
a full disk: SQLite's ``SQLITE_FULL`` ("database or disk is full"), PostgreSQL's SQLSTATE class 53
(``53100 disk_full``: "could not extend file", "No space left on device").
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import ExceptionContext, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from blobstore.errors import BlobstoreError, StorageFull, StorageUnavailable

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
        _configure_sqlite(engine.sync_engine)
        _translate_resource_errors(engine.sync_engine)
        return engine
    kwargs.setdefault("pool_pre_ping", True)
    engine = create_async_engine(url, **kwargs)
    _translate_resource_errors(engine.sync_engine)
    return engine


def sqlite_file(database_url: str | sa.URL) -> Path | None:
    """The database file of a SQLite URL; None for PostgreSQL and in-memory SQLite."""
    url = make_url(database_url)
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    return Path(url.database)


def create_sqlite_read_engine(database_url: str) -> sa.Engine | None:
    """A synchronous, query-only engine over the same SQLite file, for the hot single-row reads.

    An async read through aiosqlite costs several thread hops (begin, execute, fetch, rollback, each one a
    round trip to the driver's thread); the same statement on a plain ``sqlite3`` connection inside one
    worker-thread call is about seven times faster. Returns None for anything but a SQLite file.
    """
    if sqlite_file(database_url) is None:
        return None
    engine = sa.create_engine(
        make_url(database_url).set(drivername="sqlite+pysqlite"), connect_args={"check_same_thread": False}
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


def create_sqlite_write_engine(database_url: str) -> sa.Engine | None:
    """A synchronous engine over the same SQLite file for the group commits of new artifacts.

    A whole group's transaction runs in one worker-thread call on a plain ``sqlite3`` connection, where the
    async engine would make a round trip to aiosqlite's thread for every statement. Same settings as the
    async engine (WAL, ``BEGIN IMMEDIATE``, ``synchronous=FULL``, error translation). Returns None for
    anything but a SQLite file.
    """
    database = sqlite_file(database_url)
    if database is None:
        return None
    _create_private_file(database)
    engine = sa.create_engine(
        make_url(database_url).set(drivername="sqlite+pysqlite"), connect_args={"check_same_thread": False}
    )
    _configure_sqlite(engine)
    _translate_resource_errors(engine)
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


def _configure_sqlite(engine: sa.Engine) -> None:
    @sa.event.listens_for(engine, "connect")
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

    @sa.event.listens_for(engine, "begin")
    def _on_begin(conn: sa.Connection) -> None:
        if conn.get_execution_options().get(READ_ONLY):
            conn.exec_driver_sql("BEGIN")
        else:
            conn.exec_driver_sql("BEGIN IMMEDIATE")


SQLITE_FULL = 13
SQLITE_IOERR_SHMSIZE = 10 | (19 << 8)
"""The shared-memory index of a WAL database could not be grown: the file system is full."""
PG_DISK_FULL = "53100"
PG_INSUFFICIENT_RESOURCES = "53"
_FULL_MESSAGES = ("database or disk is full", "no space left on device", "could not extend file")


def resource_error(exc: BaseException) -> BlobstoreError | None:
    """The catalogue error for a driver error that means the database is out of space or resources.

    ``exc`` is the DBAPI exception (sqlite3 or asyncpg through SQLAlchemy's adapter). Out of space is
    :class:`StorageFull`; the rest of PostgreSQL's class 53 (out of memory, too many connections) is
    :class:`StorageUnavailable`, a condition that clears by itself. Anything else: None.
    """
    sqlite_code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(sqlite_code, int):
        if sqlite_code & 0xFF == SQLITE_FULL or sqlite_code == SQLITE_IOERR_SHMSIZE:
            return StorageFull("the metadata database is out of space")
        return None
    sqlstate = getattr(exc, "sqlstate", None) or getattr(exc, "pgcode", None)
    text = str(exc).lower()
    if sqlstate == PG_DISK_FULL or any(message in text for message in _FULL_MESSAGES):
        return StorageFull("the metadata database is out of space")
    if isinstance(sqlstate, str) and sqlstate.startswith(PG_INSUFFICIENT_RESOURCES):
        return StorageUnavailable("the metadata database is out of resources")
    return None


def _translate_resource_errors(engine: sa.Engine) -> None:
    @sa.event.listens_for(engine, "handle_error")
    def _on_error(context: ExceptionContext) -> None:
        original = context.original_exception
        translated = resource_error(original)
        if translated is None:
            translated = resource_error(original.__cause__) if original.__cause__ is not None else None
        if translated is not None:
            # Raised here, SQLAlchemy still cleans up (rollback, connection invalidation) and then lets this
            # error propagate instead of its own wrapper; the driver error stays the cause, for debugging.
            raise translated from original

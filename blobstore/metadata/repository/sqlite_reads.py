"""The content lookup of every read (and the upload lookup of every chunk) as one plain ``sqlite3`` statement
on query-only connections.

A small range read is a handful of microseconds of ``pread`` and XXH3; the SQLAlchemy execution around its
one-row lookup (connection checkout and reset, the compiled-statement cache, bind and result processors, the
``Row`` and its mapping) cost more than the read itself. Here the statement's text is built once from the
tables, prepared by ``sqlite3``'s own statement cache, and the row is converted by hand into the same models,
with the same conversions the column types make (UTC timestamps as SQLAlchemy stores them in SQLite, JSON,
booleans). Only for a SQLite file; PostgreSQL keeps the SQLAlchemy statement.
"""

from __future__ import annotations

import functools
import json
import sqlite3
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from blobstore.metadata.engine import SQLITE_BUSY_TIMEOUT_MS
from blobstore.metadata.repository import rows
from blobstore.metadata.tables import artifacts, blobs, uploads
from blobstore.metadata.types import UTCDateTime
from blobstore.models import Artifact, BlobRecord, UploadSession
from blobstore.nowait import WouldBlock

Convert = Callable[[Any], Any]

_WAITING = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
"""Primary result codes of a statement that found the database locked (extended codes carry them in the low
byte)."""


class SqliteLookups:
    """Query-only ``sqlite3`` connections over one database file, taken by whichever thread asks.

    Idle connections wait in a list (``pop`` and ``append`` are atomic), so concurrent readers each get
    their own and a reader never waits for another; each connection is in autocommit mode, so every
    ``SELECT`` reads its own WAL snapshot and never waits for a writer. The connections of the lookups that
    must not wait (the event loop's, ``wait=False``) are kept apart, with no busy timeout: where a lock would
    make a reader wait (a WAL reader waits only in rare cases, such as another process recovering the
    write-ahead log), they raise :class:`~blobstore.nowait.WouldBlock` at once.
    """

    def __init__(self, database: Path) -> None:
        self._database = database
        self._idle: list[sqlite3.Connection] = []
        self._idle_nowait: list[sqlite3.Connection] = []
        self._closed = False
        self._lock = threading.Lock()

    def artifact_with_blob(
        self, namespace: str, artifact_id: str, now: datetime, *, wait: bool = True
    ) -> tuple[Artifact, BlobRecord] | None:
        """The visible artifact ``artifact_id`` of ``namespace`` at ``now`` and its blob row, else None.

        ``wait=False``: WouldBlock instead of waiting for a lock."""
        parameters = (artifact_id, namespace, timestamp_text(now))
        first = self._first if wait else self._first_nowait
        row = first(_lookup_sql(), parameters)
        if row is None:
            return None
        names, converted = _lookup_columns()
        values = list(row)
        for index, convert in converted:
            values[index] = convert(values[index])
        split = len(names[0])
        artifact_row = dict(zip(names[0], values[:split], strict=True))
        blob_row = dict(zip(names[1], values[split:], strict=True))
        return rows.artifact(artifact_row), rows.blob_record(blob_row)

    def upload(self, namespace: str, upload_id: str) -> UploadSession | None:
        """The upload ``upload_id`` of ``namespace``, else None (every chunk ``PUT`` looks it up twice)."""
        row = self._first(_upload_sql(), (upload_id, namespace))
        if row is None:
            return None
        columns = _upload_converters()
        return rows.upload({name: to(value) for (name, to), value in zip(columns, row, strict=True)})

    def live_content(self, sha256: str, size: int) -> bool:
        """Whether a live blob holds ``sha256`` of ``size`` bytes (the commit's dedup condition)."""
        return self._first(_LIVE_CONTENT_SQL, (sha256, size)) is not None

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            idle_nowait, self._idle_nowait = self._idle_nowait, []
        for conn in idle + idle_nowait:
            conn.close()

    def _first(self, sql: str, parameters: tuple[Any, ...]) -> tuple[Any, ...] | None:
        return self._first_on(self._idle, SQLITE_BUSY_TIMEOUT_MS, sql, parameters)

    def _first_nowait(self, sql: str, parameters: tuple[Any, ...]) -> tuple[Any, ...] | None:
        try:
            return self._first_on(self._idle_nowait, 0, sql, parameters)
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF in _WAITING:
                raise WouldBlock from None
            raise

    def _first_on(
        self, idle: list[sqlite3.Connection], busy_timeout_ms: int, sql: str, parameters: tuple[Any, ...]
    ) -> tuple[Any, ...] | None:
        try:
            conn = idle.pop()
        except IndexError:
            conn = self._connect(busy_timeout_ms)
        try:
            row: tuple[Any, ...] | None = conn.execute(sql, parameters).fetchone()
        except BaseException:
            # A connection that failed a read is not trusted with the next one.
            conn.close()
            raise
        with self._lock:
            if not self._closed:
                idle.append(conn)
                return row
        conn.close()
        return row

    def _connect(self, busy_timeout_ms: int) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self._database, isolation_level=None, check_same_thread=False, cached_statements=16
        )
        try:
            conn.execute(f"PRAGMA busy_timeout={busy_timeout_ms}")
            conn.execute("PRAGMA query_only=ON")
        except BaseException:
            conn.close()
            raise
        return conn


def timestamp_text(value: datetime) -> str:
    """``value`` as :class:`UTCDateTime` stores it in SQLite: UTC wall-clock text with microseconds, so
    comparing the text compares the times."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("naive datetime given for a timestamp column; use timezone-aware UTC")
    return value.astimezone(UTC).replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")


def _timestamp(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value).replace(tzinfo=UTC)


def _json(value: str) -> Any:
    # Most artifacts carry no metadata: the common text is answered without the parser.
    return {} if value == "{}" else json.loads(value)


def _same(value: Any) -> Any:
    return value


def _converter(column: sa.Column[Any]) -> Convert:
    if isinstance(column.type, UTCDateTime):
        return _timestamp
    if isinstance(column.type, sa.JSON):
        return _json
    if isinstance(column.type, sa.Boolean):
        return bool
    return _same


@functools.cache
def _lookup_columns() -> tuple[tuple[tuple[str, ...], tuple[str, ...]], tuple[tuple[int, Convert], ...]]:
    """The lookup row's column names (artifacts', blobs', in :func:`_lookup_sql`'s order) and the positions
    that need a conversion: most columns are taken as they are (a small read's row is about twenty)."""
    names = (tuple(column.name for column in artifacts.c), tuple(column.name for column in blobs.c))
    columns = (*artifacts.c, *blobs.c)
    converted = tuple(
        (index, convert)
        for index, column in enumerate(columns)
        if (convert := _converter(column)) is not _same
    )
    return names, converted


_LIVE_CONTENT_SQL = "SELECT 1 FROM blobs WHERE sha256 = ? AND size = ? AND state = 'live'"
"""The state as a literal, as the partial unique index on live digests is declared, so SQLite uses it."""


@functools.cache
def _upload_converters() -> tuple[tuple[str, Convert], ...]:
    return tuple((column.name, _converter(column)) for column in uploads.c)


@functools.cache
def _upload_sql() -> str:
    """``UploadRepository.get_upload``'s statement written out for SQLite."""
    selected = ", ".join(f'"{column.name}"' for column in uploads.c)
    # Column names from the table definition, no outside input: the values are bound parameters.
    return f"SELECT {selected} FROM uploads WHERE id = ? AND namespace = ?"  # noqa: S608


@functools.cache
def _lookup_sql() -> str:
    """The SQLAlchemy lookup's statement (``_artifact_with_blob``) written out for SQLite: the same join and
    the same visibility rule (pinned, no expiry, or expiring after ``now``)."""
    selected = ", ".join(
        [f'a."{column.name}"' for column in artifacts.c] + [f'b."{column.name}"' for column in blobs.c]
    )
    # Column names from the table definitions, no outside input: the values are bound parameters.
    return (
        f"SELECT {selected} FROM artifacts AS a JOIN blobs AS b ON b.id = a.blob_id "  # noqa: S608
        "WHERE a.id = ? AND a.namespace = ? AND (a.pinned = 1 OR a.expires_at IS NULL OR a.expires_at > ?)"
    )

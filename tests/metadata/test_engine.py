"""Engine settings: supported URLs, SQLite pragmas and transaction modes, UTC timestamps, readiness check."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from blobstore.errors import StorageUnavailable
from blobstore.metadata.engine import READ_ONLY, SQLITE_BUSY_TIMEOUT_MS, create_engine
from blobstore.metadata.repository import MetadataRepository
from blobstore.metadata.tables import artifacts, tokens


@pytest.mark.parametrize(
    "url", ["mysql+aiomysql://u@h/db", "sqlite:///sync-driver.db", "postgresql://u@h/db", "not a url"]
)
def test_unsupported_database_url_names_the_setting(url: str) -> None:
    with pytest.raises(ValueError, match="BLOBSTORE_DATABASE_URL"):
        create_engine(url)


@pytest.fixture
async def sqlite_engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(database_url)
    try:
        yield engine
    finally:
        await engine.dispose()


sqlite_only = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


def sqlite_path(engine: AsyncEngine) -> str:
    database = engine.url.database
    assert database is not None
    return database


@sqlite_only
async def test_sqlite_connections_use_wal_foreign_keys_and_busy_timeout(sqlite_engine: AsyncEngine) -> None:
    async with sqlite_engine.connect() as conn:
        journal = await conn.scalar(sa.text("PRAGMA journal_mode"))
        foreign_keys = await conn.scalar(sa.text("PRAGMA foreign_keys"))
        busy = await conn.scalar(sa.text("PRAGMA busy_timeout"))

    assert (journal, foreign_keys, busy) == ("wal", 1, SQLITE_BUSY_TIMEOUT_MS)


@sqlite_only
async def test_sqlite_write_transaction_holds_the_write_lock_from_begin(sqlite_engine: AsyncEngine) -> None:
    other = sqlite3.connect(sqlite_path(sqlite_engine), timeout=0, isolation_level=None)
    try:
        async with sqlite_engine.begin():
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                other.execute("BEGIN IMMEDIATE")
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
    finally:
        other.close()


@sqlite_only
async def test_sqlite_read_only_transaction_does_not_block_writers(sqlite_engine: AsyncEngine) -> None:
    other = sqlite3.connect(sqlite_path(sqlite_engine), timeout=0, isolation_level=None)
    try:
        async with sqlite_engine.execution_options(**{READ_ONLY: True}).begin() as conn:
            await conn.execute(sa.select(tokens.c.id))
            other.execute("BEGIN IMMEDIATE")
            other.execute("ROLLBACK")
    finally:
        other.close()


async def test_foreign_keys_are_enforced(sqlite_engine: AsyncEngine) -> None:
    row = {
        "id": "a",
        "namespace": "ns",
        "name": "n",
        "mime_type": "text/plain",
        "size": 1,
        "sha256": "0" * 64,
        "blob_id": 12345,
        "created_at": datetime(2030, 1, 1, tzinfo=UTC),
        "user_metadata": {},
        "media": {},
    }
    with pytest.raises(sa.exc.IntegrityError):
        async with sqlite_engine.begin() as conn:
            await conn.execute(sa.insert(artifacts).values(**row))


async def test_timestamps_come_back_as_the_same_instant_in_utc(sqlite_engine: AsyncEngine) -> None:
    plus_two = timezone(timedelta(hours=2))
    early = datetime(2030, 1, 1, 1, 30, tzinfo=plus_two)  # 23:30 UTC the day before
    late = datetime(2030, 1, 1, 0, 15, tzinfo=UTC)
    async with sqlite_engine.begin() as conn:
        for token_id, created in (("late", late), ("early", early)):
            await conn.execute(
                sa.insert(tokens).values(
                    id=token_id, namespace="ns", scopes="read", secret_hash=token_id, created_at=created
                )
            )
    async with sqlite_engine.connect() as conn:
        rows = (
            await conn.execute(sa.select(tokens.c.id, tokens.c.created_at).order_by(tokens.c.created_at))
        ).all()
        after_midnight = await conn.scalar(
            sa.select(sa.func.count())
            .select_from(tokens)
            .where(tokens.c.created_at >= late - timedelta(minutes=15))
        )

    assert [token_id for token_id, _ in rows] == ["early", "late"]
    assert rows[0][1] == early
    assert rows[0][1].tzinfo == UTC
    assert rows[1][1].tzinfo == UTC
    assert after_midnight == 1


async def test_naive_timestamps_are_rejected(sqlite_engine: AsyncEngine) -> None:
    with pytest.raises(sa.exc.StatementError, match="naive datetime"):
        async with sqlite_engine.begin() as conn:
            await conn.execute(
                sa.insert(tokens).values(
                    id="t", namespace="ns", scopes="read", secret_hash="h", created_at=datetime(2030, 1, 1)
                )
            )


async def test_check_passes_and_names_the_dialect(repo: MetadataRepository, database_url: str) -> None:
    await repo.check()
    assert repo.dialect == database_url.split("+")[0]


@pytest.mark.parametrize(
    "url", ["postgresql+asyncpg://postgres@127.0.0.1:1/none", "sqlite+aiosqlite:///{tmp}/not-a-database.db"]
)
async def test_check_reports_an_unusable_database_as_storage_unavailable(url: str, tmp_path: Path) -> None:
    # Not a missing directory for SQLite: aiosqlite then leaves a stop callback for a loop that may be closed.
    (tmp_path / "not-a-database.db").write_bytes(b"this is not a SQLite file" * 100)
    repo = await MetadataRepository.open(url.format(tmp=tmp_path))
    try:
        with pytest.raises(StorageUnavailable):
            await repo.check()
    finally:
        await repo.close()


async def test_sqlite_database_and_its_wal_files_are_private_whatever_the_umask(tmp_path: Path) -> None:
    from blobstore.metadata.migrate import upgrade_async

    path = tmp_path / "meta.sqlite3"
    old = os.umask(0)
    try:
        url = f"sqlite+aiosqlite:///{path}"
        await upgrade_async(url)
        repo = await MetadataRepository.open(url)
        try:
            await repo.check()
            modes = {p.name: p.stat().st_mode & 0o777 for p in tmp_path.iterdir()}  # noqa: ASYNC240
        finally:
            await repo.close()
    finally:
        os.umask(old)
    assert modes
    assert modes == dict.fromkeys(modes, 0o600)


def test_sqlite_fast_read_engine_is_query_only_and_absent_elsewhere(tmp_path: Path) -> None:
    from blobstore.metadata.engine import create_sqlite_read_engine

    path = tmp_path / "fast.sqlite3"
    sqlite3.connect(path).close()
    engine = create_sqlite_read_engine(f"sqlite+aiosqlite:///{path}")
    assert engine is not None
    try:
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT 1")).scalar() == 1
            with pytest.raises(sa.exc.OperationalError, match="readonly"):
                conn.execute(sa.text("CREATE TABLE t (x INTEGER)"))
    finally:
        engine.dispose()
    assert create_sqlite_read_engine("sqlite+aiosqlite:///:memory:") is None
    assert create_sqlite_read_engine("postgresql+asyncpg://u@h/db") is None

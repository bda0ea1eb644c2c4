"""Alembic migrations create exactly ``blobstore.metadata.tables`` on SQLite and PostgreSQL."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from blobstore.metadata import migrate
from blobstore.metadata.engine import create_engine
from blobstore.metadata.tables import metadata
from tests.metadata.helpers import migrated_then


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def empty_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'fresh.db'}"
    url: str = request.getfixturevalue("pg_url")
    return url


async def schema_drift(url: str) -> Sequence[Any]:
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(
                lambda sync_conn: compare_metadata(
                    MigrationContext.configure(
                        sync_conn, opts={"compare_type": True, "compare_server_default": True}
                    ),
                    metadata,
                )
            )
    finally:
        await engine.dispose()


async def table_names(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            return set(await conn.run_sync(lambda sync_conn: sa.inspect(sync_conn).get_table_names()))
    finally:
        await engine.dispose()


async def downgrade(url: str, revision: str) -> None:
    await anyio.to_thread.run_sync(command.downgrade, migrate.alembic_config(url), revision)


async def index_names(url: str, table: str) -> set[str]:
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            indexes = await conn.run_sync(lambda sync_conn: sa.inspect(sync_conn).get_indexes(table))
    finally:
        await engine.dispose()
    return {str(index["name"]) for index in indexes}


async def test_upgrade_brings_an_empty_database_to_head(empty_database_url: str) -> None:
    assert await migrate.current_revision_async(empty_database_url) is None

    await migrate.upgrade_async(empty_database_url)

    assert await migrate.current_revision_async(empty_database_url) == migrate.head_revision()
    assert await table_names(empty_database_url) == set(metadata.tables) | {"alembic_version"}


async def test_migrated_schema_has_no_drift_from_the_tables(empty_database_url: str) -> None:
    await migrate.upgrade_async(empty_database_url)

    assert await schema_drift(empty_database_url) == []


async def test_drift_check_notices_a_missing_index(empty_database_url: str) -> None:
    await migrated_then(empty_database_url, "DROP INDEX uq_blobs_sha256_live")

    drift = await schema_drift(empty_database_url)

    assert [(op[0], op[1].name) for op in drift] == [("add_index", "uq_blobs_sha256_live")]


async def test_upgrading_twice_changes_nothing(empty_database_url: str) -> None:
    await migrate.upgrade_async(empty_database_url)
    await migrate.upgrade_async(empty_database_url)

    assert await schema_drift(empty_database_url) == []


async def test_every_revision_downgrades_to_an_empty_database_and_back(empty_database_url: str) -> None:
    await migrate.upgrade_async(empty_database_url)

    await downgrade(empty_database_url, "base")

    assert await migrate.current_revision_async(empty_database_url) is None
    assert await table_names(empty_database_url) == {"alembic_version"}
    await migrate.upgrade_async(empty_database_url)
    assert await schema_drift(empty_database_url) == []


async def test_audit_events_table_is_dropped_by_0004_and_restored_by_its_downgrade(
    empty_database_url: str,
) -> None:
    await migrate.upgrade_async(empty_database_url, "0003")
    assert "audit_events" in await table_names(empty_database_url)

    await migrate.upgrade_async(empty_database_url, "0004")
    assert "audit_events" not in await table_names(empty_database_url)

    await downgrade(empty_database_url, "0003")
    assert await migrate.current_revision_async(empty_database_url) == "0003"
    assert "audit_events" in await table_names(empty_database_url)
    assert await index_names(empty_database_url, "audit_events") == {"ix_audit_events_time"}


async def test_renditions_table_is_added_by_0005_and_removed_by_its_downgrade(
    empty_database_url: str,
) -> None:
    await migrate.upgrade_async(empty_database_url, "0004")
    assert "renditions" not in await table_names(empty_database_url)

    await migrate.upgrade_async(empty_database_url, "0005")
    assert "renditions" in await table_names(empty_database_url)
    assert await index_names(empty_database_url, "renditions") == {
        "ix_renditions_blob_id",
        "ix_renditions_source_sha256",
        "ix_renditions_expires_at",
    }
    assert "ix_artifacts_sha256" in await index_names(empty_database_url, "artifacts")

    await downgrade(empty_database_url, "0004")
    assert await migrate.current_revision_async(empty_database_url) == "0004"
    assert "renditions" not in await table_names(empty_database_url)
    assert "ix_artifacts_sha256" not in await index_names(empty_database_url, "artifacts")


async def test_console_sessions_and_signing_keys_are_added_by_0006_and_removed_by_its_downgrade(
    empty_database_url: str,
) -> None:
    await migrate.upgrade_async(empty_database_url, "0005")
    assert {"console_sessions", "signing_keys"}.isdisjoint(await table_names(empty_database_url))

    await migrate.upgrade_async(empty_database_url, "0006")
    assert {"console_sessions", "signing_keys"} <= await table_names(empty_database_url)
    assert await index_names(empty_database_url, "console_sessions") == {
        "ix_console_sessions_token_id",
        "ix_console_sessions_idle_until",
    }

    await downgrade(empty_database_url, "0005")
    assert await migrate.current_revision_async(empty_database_url) == "0005"
    assert {"console_sessions", "signing_keys"}.isdisjoint(await table_names(empty_database_url))


@pytest.mark.postgres
def test_replicas_migrating_at_once_all_succeed(pg_url: str) -> None:
    # Separate processes, like replicas: Alembic keeps its running environment in module globals.
    code = "import sys; from blobstore.metadata.migrate import upgrade; upgrade(sys.argv[1])"
    replicas = [subprocess.Popen([sys.executable, "-c", code, pg_url]) for _ in range(3)]
    exit_codes = [replica.wait(timeout=120) for replica in replicas]

    assert exit_codes == [0, 0, 0]
    assert migrate.current_revision(pg_url) == migrate.head_revision()


def test_sync_upgrade_and_current_revision_work_outside_an_event_loop(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'sync.db'}"

    migrate.upgrade(url)

    assert migrate.current_revision(url) == migrate.head_revision()


def test_migrations_are_found_in_the_top_level_migrations_folder_of_a_checkout() -> None:
    # An editable install maps the blobstore.migrations package to the folder (tests/test_packaging.py checks
    # the wheel).
    checkout = Path(__file__).resolve().parents[2]

    assert migrate.migrations_dir() == checkout / "migrations"
    assert (migrate.migrations_dir() / "env.py").is_file()
    assert (migrate.migrations_dir() / "script.py.mako").is_file()

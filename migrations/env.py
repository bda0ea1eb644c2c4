"""Alembic environment: runs the revisions in ``versions/`` on SQLite or PostgreSQL through the async engine.

The database URL comes from :func:`blobstore.metadata.migrate.upgrade` (``config.attributes``), else from
``sqlalchemy.url`` in an ``alembic.ini``, else from ``BLOBSTORE_DATABASE_URL``.
"""

from __future__ import annotations

import asyncio
import os

import sqlalchemy as sa
from alembic import context

from blobstore.metadata.engine import create_engine
from blobstore.metadata.tables import metadata

config = context.config


def _database_url() -> str:
    url = (
        config.attributes.get("database_url")
        or config.get_main_option("sqlalchemy.url")
        or os.environ.get("BLOBSTORE_DATABASE_URL")
    )
    if not url:
        raise ValueError("no database URL for migrations: set BLOBSTORE_DATABASE_URL")
    return str(url)


def _configure(connection: sa.Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        # SQLite cannot ALTER most things in place; batch mode rebuilds the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )


MIGRATION_LOCK_KEY = 0x626C6F6273746F72
"""PostgreSQL advisory lock key ("blobstor"): replicas that start together migrate one after the other."""


def _run_with_connection(connection: sa.Connection) -> None:
    _configure(connection)
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":
            # Transaction-scoped, so it is released with the migration's commit or rollback.
            connection.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
        context.run_migrations()


async def _run_online(url: str) -> None:
    engine = create_engine(url, poolclass=sa.NullPool)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run_with_connection)
    finally:
        await engine.dispose()


def _run_offline(url: str) -> None:
    context.configure(url=url, target_metadata=metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    _run_offline(_database_url())
else:
    asyncio.run(_run_online(_database_url()))

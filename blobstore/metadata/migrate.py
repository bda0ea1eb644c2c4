"""Schema migrations, run programmatically so they work the same from a checkout and from an installed wheel.

The Alembic environment and revisions live in the top-level ``migrations/`` folder, installed as the
``blobstore.migrations`` package (a wheel ships it; an editable install maps it to the folder); ``blobstore
migrate`` calls :func:`upgrade`. Migrations take no data-directory lock, so they can run beside a server.

Alembic (with Mako and Pygments, about 10 MiB resident) is imported only when there is something to migrate
or a script to read: every process that opens an up-to-date store (each ``blobstore serve`` worker,
``blobstore mcp``, every CLI command) finds the database at :data:`HEAD_REVISION` with one query and goes on
without it.
"""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Final

import anyio.to_thread
import sqlalchemy as sa

from blobstore.metadata.engine import create_engine

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_PACKAGE = "blobstore.migrations"
HEAD_REVISION: Final = "0006"
"""The newest revision in ``migrations/versions`` (tests/metadata check it against Alembic's head): a database
recorded at it needs no migration, which is found out without importing Alembic."""
VERSION_TABLE: Final = "alembic_version"
_READ_VERSIONS: Final = sa.text("SELECT version_num FROM alembic_version")


def migrations_dir() -> Path:
    """The folder of the Alembic environment, wherever the ``blobstore.migrations`` package is installed."""
    spec = importlib.util.find_spec(MIGRATIONS_PACKAGE)
    if spec is None or spec.origin is None:
        # An editable install made before the package existed: its import mapping does not know it.
        raise RuntimeError(f"{MIGRATIONS_PACKAGE} is not installed: reinstall mcp-blobstore (pip install .)")
    return Path(spec.origin).parent


def alembic_config(database_url: str) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    # Through attributes, not sqlalchemy.url: ConfigParser would treat a "%" in a password as interpolation.
    config.attributes["database_url"] = database_url
    return config


_alembic_lock = threading.Lock()


def upgrade(database_url: str, revision: str = "head") -> None:
    """Bring the database at ``database_url`` up to ``revision``; blocking (it runs its own event loop).

    Replicas may run this at the same time: on PostgreSQL the migration takes an advisory lock, on SQLite
    ``BEGIN IMMEDIATE`` serializes it.
    """
    from alembic import command

    # Alembic keeps the running environment in module globals, so one migration per process at a time.
    with _alembic_lock:
        command.upgrade(alembic_config(database_url), revision)


async def upgrade_async(database_url: str, revision: str = "head") -> None:
    """:func:`upgrade` from async code: Alembic's environment runs its own event loop, so it gets a thread.

    A database already at the newest revision is left as it is without loading Alembic at all."""
    if revision in ("head", HEAD_REVISION) and await current_revision_async(database_url) == HEAD_REVISION:
        return
    await anyio.to_thread.run_sync(upgrade, database_url, revision)


def head_revision() -> str:
    """The newest revision as Alembic reads it from the scripts (what :data:`HEAD_REVISION` must equal)."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config("")).get_current_head()
    if head is None:
        raise RuntimeError(f"no migration revisions found in {migrations_dir()}")
    return head


async def current_revision_async(database_url: str) -> str | None:
    """The revision the database is at, or None when it was never migrated."""
    engine = create_engine(database_url, poolclass=sa.NullPool)
    try:
        async with engine.connect() as connection:
            return await connection.run_sync(_current_revision)
    finally:
        await engine.dispose()


def current_revision(database_url: str) -> str | None:
    """Blocking :func:`current_revision_async`, for command-line use outside an event loop."""
    return anyio.run(current_revision_async, database_url)


def _current_revision(connection: sa.Connection) -> str | None:
    """The one revision in Alembic's version table, as ``MigrationContext.get_current_revision`` reads it."""
    if not sa.inspect(connection).has_table(VERSION_TABLE):
        return None
    versions = connection.execute(_READ_VERSIONS).scalars().all()
    if len(versions) > 1:
        # Branched histories are not used here; Alembic refuses them the same way.
        raise RuntimeError(f"the database records several revisions at once: {sorted(versions)}")
    return str(versions[0]) if versions else None

"""A store already at the newest revision opens without Alembic: the check reads the version table directly.

Every process that opens the store (each server worker, ``blobstore mcp``, every command) would otherwise load
Alembic, Mako and Pygments for a migration that has nothing to do.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from blobstore.metadata import migrate
from tests.metadata.helpers import migrated_then


def test_the_head_constant_is_the_newest_revision_alembic_finds() -> None:
    assert migrate.head_revision() == migrate.HEAD_REVISION


def test_opening_an_up_to_date_store_does_not_load_alembic(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    migrate_first = [str(Path(sys.executable).with_name("blobstore")), "migrate", "--data-dir", str(data_dir)]
    subprocess.run(migrate_first, check=True, capture_output=True)
    code = (
        "import sys, anyio\n"
        "from pathlib import Path\n"
        "from blobstore.config import Settings\n"
        "from blobstore.runtime import open_service\n"
        "async def main():\n"
        "    async with open_service(Settings(data_dir=Path(sys.argv[1]))):\n"
        "        pass\n"
        "anyio.run(main)\n"
        "print(sorted(name for name in sys.modules if name.split('.')[0] in ('alembic', 'mako')))\n"
    )
    argv = [sys.executable, "-c", code, str(data_dir)]
    opened = subprocess.run(argv, check=True, capture_output=True, text=True)

    assert opened.stdout.strip() == "[]"


async def test_an_empty_database_is_still_migrated_in_full(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'fresh.db'}"

    await migrate.upgrade_async(url)

    assert await migrate.current_revision_async(url) == migrate.HEAD_REVISION


async def test_a_database_at_an_older_revision_is_brought_to_head(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'old.db'}"
    await migrate.upgrade_async(url, "0003")

    await migrate.upgrade_async(url)

    assert await migrate.current_revision_async(url) == migrate.HEAD_REVISION


async def test_several_recorded_revisions_are_refused(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'branched.db'}"
    await migrated_then(url, "INSERT INTO alembic_version (version_num) VALUES ('0003')")

    with pytest.raises(RuntimeError, match="several revisions"):
        await migrate.current_revision_async(url)

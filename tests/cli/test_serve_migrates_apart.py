"""``blobstore serve`` migrates in a child process, so the process granian forks its worker from never loads
Alembic (the worker would carry it for its whole life)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from blobstore.cli import main
from blobstore.cli import serve as serve_module
from blobstore.metadata.migrate import HEAD_REVISION, current_revision

PROBE = """
import sys
from pathlib import Path
from blobstore.cli.serve import migrate_apart
from blobstore.config import Settings
settings = Settings(data_dir=Path(sys.argv[1]))
migrate_apart(settings)
print(sorted(name for name in sys.modules if name.split(".")[0] in ("alembic", "mako")))
"""


def test_a_fresh_data_directory_is_migrated_without_loading_alembic_here(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"

    probed = subprocess.run(
        [sys.executable, "-c", PROBE, str(data_dir)], check=True, capture_output=True, text=True
    )

    assert probed.stdout.strip() == "[]"
    assert current_revision(f"sqlite+aiosqlite:///{data_dir / 'metadata.sqlite3'}") == HEAD_REVISION


def test_serve_fails_with_one_line_when_the_migration_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(serve_module._RUNNERS, "uvicorn", lambda settings: None)
    monkeypatch.setattr(serve_module, "current_revision", lambda url: None)
    # A database URL the child cannot open: its directory is a file.
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("BLOBSTORE_DATABASE_URL", f"sqlite+aiosqlite:///{blocker / 'x.db'}")

    result = CliRunner().invoke(main, ["serve", "--data-dir", str(tmp_path / "d"), "--server", "uvicorn"])

    assert result.exit_code == 1
    assert "cannot migrate the metadata database: " in result.output
    assert "Traceback" not in result.output

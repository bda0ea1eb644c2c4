"""Commands on a PostgreSQL database that was never migrated, or is behind the newest migration: the
admin commands stop with one line telling to run ``blobstore migrate``; ``blobstore mcp`` migrates, like
``serve``."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy.engine import make_url

from blobstore.cli import main
from blobstore.metadata import migrate
from tests.fixtures.commands import run_cli
from tests.fixtures.server import isolated_env

pytestmark = pytest.mark.postgres

PASSWORD = "not-shown-anywhere"

ADMIN_COMMANDS = [
    ["cleanup"],
    ["stats"],
    ["verify"],
    ["token", "list"],
    ["token", "create", "--namespace", "alpha"],
    ["token", "revoke", "t_unknown"],
]


@pytest.fixture
def url_with_password(pg_url: str) -> str:
    # The test server trusts local connections, so any password is accepted and must still not be printed.
    return make_url(pg_url).set(password=PASSWORD).render_as_string(hide_password=False)


def run(args: list[str], database_url: str, tmp_path: Path) -> tuple[int, str]:
    result = CliRunner().invoke(
        main, [*args], env={"BLOBSTORE_DATABASE_URL": database_url, "BLOBSTORE_DATA_DIR": str(tmp_path)}
    )
    return result.exit_code, result.output


@pytest.mark.parametrize("args", ADMIN_COMMANDS, ids=" ".join)
def test_admin_command_on_a_never_migrated_database_stops_with_one_line_naming_it(
    args: list[str], url_with_password: str, tmp_path: Path
) -> None:
    code, output = run(args, url_with_password, tmp_path)

    database = make_url(url_with_password).database
    assert code == 2, output
    assert output.count("\n") == 1, output
    assert output.startswith("blobstore: ")
    assert f"/{database}" in output
    assert "blobstore migrate" in output
    assert "never migrated" in output
    assert PASSWORD not in output
    assert migrate.current_revision(url_with_password) is None


@pytest.mark.parametrize("args", ADMIN_COMMANDS, ids=" ".join)
def test_admin_command_on_a_database_behind_the_newest_migration_names_both_revisions(
    args: list[str], pg_url: str, tmp_path: Path
) -> None:
    migrate.upgrade(pg_url, "0003")

    code, output = run(args, pg_url, tmp_path)

    assert code == 2, output
    assert output.count("\n") == 1, output
    assert "0003" in output
    assert migrate.head_revision() in output
    assert "blobstore migrate" in output
    assert migrate.current_revision(pg_url) == "0003"


def test_admin_command_runs_once_the_database_is_migrated(pg_url: str, tmp_path: Path) -> None:
    assert run(["migrate"], pg_url, tmp_path)[0] == 0

    code, output = run(["token", "list"], pg_url, tmp_path)

    assert code == 0, output
    assert "no tokens" in output


def test_mcp_migrates_a_never_migrated_database_before_serving(pg_url: str, tmp_path: Path) -> None:
    env = isolated_env({"BLOBSTORE_DATABASE_URL": pg_url, "BLOBSTORE_DATA_DIR": str(tmp_path)})

    # No host on stdin: the server opens the store, reads end of input and stops.
    finished = run_cli(["mcp"], env, stdin=subprocess.DEVNULL)

    assert finished.returncode == 0, finished.stderr
    assert "Traceback" not in finished.stderr
    assert migrate.current_revision(pg_url) == migrate.head_revision()

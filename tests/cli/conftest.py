"""The MCP tester's tests run ``blobstore call``, ``read``, ``tools``, ``resources`` and ``test`` as a person
would, as subprocesses, against real servers: this store's ``/mcp`` (a ``blobstore serve`` of the module),
``blobstore mcp`` on stdio, the example servers, the proxy tests' Python upstream and the reference npm server
``@modelcontextprotocol/server-everything`` (``tests/proxy/js``, installed by ``.ci/run``)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final

import pytest
from click.testing import CliRunner

from blobstore.cli import main
from tests.fixtures.commands import run_cli
from tests.fixtures.server import Server, isolated_env, serving
from tests.proxy.conftest import EVERYTHING_SERVER, PYTHON_UPSTREAM, RAW_UPSTREAM
from tests.proxy.conftest import npm_servers as npm_servers

ROOT: Final = Path(__file__).resolve().parents[2]
EXAMPLES: Final = ROOT / "examples"
IMAGE_SERVER: Final = [sys.executable, str(EXAMPLES / "image_tool_server.py")]
FILE_SERVER: Final = [sys.executable, str(EXAMPLES / "file_tool_server.py")]
EVERYTHING: Final = ["node", str(EVERYTHING_SERVER), "stdio"]
__all__ = ["EVERYTHING", "FILE_SERVER", "IMAGE_SERVER", "PYTHON_UPSTREAM", "RAW_UPSTREAM"]


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Person:
    """Someone at a shell in ``home``: the virtualenv's ``bin`` on ``PATH``, the store of the example servers
    and of ``--as-host`` in ``home/data``, files saved in ``home/work``.

    :meth:`blobstore` runs the installed command as a subprocess, as a person does; :meth:`here` runs the same
    command line in this process (click's runner, the same environment and directory, an exception let
    through rather than printed), where coverage measures the tester's code."""

    def __init__(self, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.home = home
        self._monkeypatch = monkeypatch
        self.work = home / "work"
        self.work.mkdir(parents=True, exist_ok=True)
        self.data_dir = home / "data"
        self.env = isolated_env(
            {
                "HOME": str(home),
                "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
                "BLOBSTORE_DATA_DIR": str(self.data_dir),
                "XDG_CACHE_HOME": str(home / "cache"),
                "COLUMNS": "120",
            }
        )

    def blobstore(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return run_cli(list(args), self.env, cwd=cwd or self.work)

    def call(self, *args: str, server: Sequence[str]) -> subprocess.CompletedProcess[str]:
        return self.blobstore("call", *args, "--", *server)

    def here(self, *args: str) -> subprocess.CompletedProcess[str]:
        with self._monkeypatch.context() as patch:
            for name in [name for name in os.environ if name.startswith("BLOBSTORE_")]:
                patch.delenv(name)
            for name, value in self.env.items():
                patch.setenv(name, value)
            patch.chdir(self.work)
            result = CliRunner().invoke(main, list(args), catch_exceptions=False)
        return subprocess.CompletedProcess(
            ["blobstore", *args], result.exit_code, result.stdout, result.stderr
        )

    def call_here(self, *args: str, server: Sequence[str]) -> subprocess.CompletedProcess[str]:
        return self.here("call", *args, "--", *server)


def one_line_failure(done: subprocess.CompletedProcess[str], status: int) -> str:
    """The failure line a command printed: exactly one ``blobstore:`` line on stderr and no traceback (a
    server's own lines on stderr aside)."""
    assert done.returncode == status, (done.returncode, done.stdout, done.stderr)
    ours = [line for line in done.stderr.splitlines() if line.startswith("blobstore:")]
    assert len(ours) == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return ours[0]


@pytest.fixture
def person(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Person:
    return Person(tmp_path, monkeypatch)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """This store's ``blobstore serve``, its ``/mcp`` the endpoint the tests call."""
    with serving(tmp_path_factory.mktemp("store")) as running:
        yield running


@pytest.fixture(scope="session")
def everything_installed() -> None:
    assert EVERYTHING_SERVER.exists(), (
        f"run `npm ci --prefix {EVERYTHING_SERVER.parents[3]}` first (.ci/run does)"
    )

"""The README's quick start as a new user runs it: a copy of the checkout, its first command exactly (a plain,
non-editable ``pip install .`` into a new virtualenv, then ``blobstore serve``), started from the checkout's
root with an empty ``HOME``.

The rest of the suite runs on an editable install, where the checkout and the installed package are one tree;
here they differ (the checkout has no ``blobstore/migrations``, the install does), so a command that imports
from the working directory instead of the install fails here and nowhere else.
"""

from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from mcp import Client, StdioServerParameters

from tests.fixtures.ports import free_port
from tests.fixtures.waiting import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
QUICK_START = README[README.index("## Quick start") : README.index("## Using it")]
(SERVE_COMMAND,) = re.findall(
    r"^python3 -m venv \.venv && \.venv/bin/pip install \. && .+$", QUICK_START, re.M
)
INSTALL_SECONDS = 600.0


def copy_of_the_checkout(target: Path) -> Path:
    """What a fresh clone holds: the files git tracks, as they are in the working tree."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, text=True
    ).stdout.split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():  # a tracked file deleted in the working tree is not in the clone either
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            (target / name).write_bytes(source.read_bytes())
    return target


def new_user_environment(home: Path, port: int) -> dict[str, str]:
    """An empty home, system directories and a ``python3`` on ``PATH``; the port by its documented variable,
    so that the command stays the README's. pip keeps this machine's cache (the same install, only faster),
    and nothing of this suite's virtualenv leaks in."""
    python_dir = Path(sys.executable).parent
    env = {
        "HOME": str(home),
        "PATH": f"{python_dir}:/usr/local/bin:/usr/bin:/bin",
        "BLOBSTORE_PORT": str(port),
        "PIP_CACHE_DIR": os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip")),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    return env


@pytest.fixture(scope="module")
def fresh_checkout(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str], str]]:
    """The quick start's command running from a copy of the checkout: (checkout, environment, base URL)."""
    base = tmp_path_factory.mktemp("quick-start")
    checkout = copy_of_the_checkout(base / "mcp-blobstore")
    home = base / "home"
    home.mkdir()
    port = free_port()
    env = new_user_environment(home, port)
    log = base / "serve.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            ["bash", "-c", SERVE_COMMAND],
            cwd=checkout,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        if server.poll() is not None:
            raise AssertionError(
                f"the quick start exited with {server.returncode}:\n{log.read_text()[-3000:]}"
            )
        try:
            return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_until(
            healthy, within=INSTALL_SECONDS, what=lambda: f"the quick start: {log.read_text()[-3000:]}"
        )
        yield checkout, env, url
    finally:
        stop(server)


def stop(server: subprocess.Popen[bytes]) -> None:
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGINT)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def shadowing_directory(path: Path) -> Path:
    """A working directory whose ``blobstore`` and ``mcp_resources`` packages fail to import."""
    for package in ("blobstore", "mcp_resources"):
        (path / package).mkdir(parents=True)
        (path / package / "__init__.py").write_text(
            f"raise ImportError('the working directory: {package}')\n"
        )
    return path


def test_the_quick_start_serves_an_upload_and_its_download_from_the_checkout_root(
    fresh_checkout: tuple[Path, dict[str, str], str],
) -> None:
    checkout, env, url = fresh_checkout
    assert not any((checkout / ".venv" / "lib").glob("python3*/site-packages/__editable__*"))
    body = os.urandom(300_000)

    created = httpx.post(f"{url}/v1/artifacts", params={"name": "quick.bin"}, content=body, timeout=30)
    assert created.status_code == 201, created.text
    artifact = created.json()
    downloaded = httpx.get(f"{url}/v1/artifacts/{artifact['id']}/content", timeout=30)

    assert downloaded.status_code == 200
    assert downloaded.content == body
    assert artifact["sha256"].removeprefix("sha256:") == hashlib.sha256(body).hexdigest()
    # The default data directory is the README's, under the (empty) home.
    assert (Path(env["HOME"]) / ".local" / "share" / "mcp-blobstore" / "metadata.sqlite3").is_file()


def test_the_installed_commands_run_from_the_checkout_root(
    fresh_checkout: tuple[Path, dict[str, str], str], tmp_path: Path
) -> None:
    checkout, env, url = fresh_checkout
    blobstore = str(checkout / ".venv" / "bin" / "blobstore")
    data = ["--data-dir", str(tmp_path / "data")]
    commands = (
        ["migrate", *data],
        ["token", "create", "--namespace", "team", *data],
        ["token", "list", *data],
        ["stats", *data],
        ["cleanup", "--dry-run", *data],
        ["verify", *data],
        ["ls", "--url", url],
        ["proxy", "--help"],
    )

    for args in commands:
        done = subprocess.run(
            [blobstore, *args], cwd=checkout, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr, (args, done.stderr)


def test_a_migration_child_that_imports_the_checkout_fails_in_one_line(
    fresh_checkout: tuple[Path, dict[str, str], str], tmp_path: Path
) -> None:
    """Why ``serve`` starts its migration child with ``-P``: without it, ``python -c`` from the checkout's
    root imports the checkout's ``blobstore/``, which has no migrations. Even that failure is one line."""
    checkout, env, _ = fresh_checkout
    url = f"sqlite+aiosqlite:///{tmp_path / 'metadata.sqlite3'}"
    variable = "BLOBSTORE_MIGRATE_DATABASE_URL"
    code = f"from blobstore.cli.migrating import migrate_child; migrate_child({variable!r})"
    python = str(checkout / ".venv" / "bin" / "python")
    child_env = {**env, variable: url}

    shadowed = subprocess.run(
        [python, "-c", code], cwd=checkout, env=child_env, capture_output=True, text=True, timeout=120
    )
    isolated = subprocess.run(
        [python, "-P", "-c", code], cwd=checkout, env=child_env, capture_output=True, text=True, timeout=120
    )

    assert shadowed.returncode == 1
    assert shadowed.stderr.strip().splitlines() == [
        "RuntimeError: blobstore.migrations is not installed: reinstall mcp-blobstore (pip install .)"
    ]
    assert isolated.returncode == 0, isolated.stderr


async def test_blobstore_mcp_runs_from_the_checkout_root(
    fresh_checkout: tuple[Path, dict[str, str], str], tmp_path: Path
) -> None:
    checkout, env, _ = fresh_checkout
    params = StdioServerParameters(
        command=str(checkout / ".venv" / "bin" / "blobstore"),
        args=["mcp", "--data-dir", str(tmp_path / "data")],
        env=env,
        cwd=str(checkout),
    )
    async with Client(params) as client:
        listed = await client.list_resources()
    assert listed.resources == []


def test_serve_runs_the_installed_package_whatever_the_working_directory_holds(
    fresh_checkout: tuple[Path, dict[str, str], str], tmp_path: Path
) -> None:
    """Neither the migration child nor granian's worker imports from the working directory."""
    checkout, env, _ = fresh_checkout
    workdir = shadowing_directory(tmp_path / "elsewhere")
    port = free_port()
    log = tmp_path / "serve.log"
    command = [str(checkout / ".venv" / "bin" / "blobstore"), "serve", "--data-dir", str(tmp_path / "data")]
    with log.open("wb") as out:
        server = subprocess.Popen(
            command,
            cwd=workdir,
            env={**env, "BLOBSTORE_PORT": str(port)},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"

    def answered() -> httpx.Response | None:
        if server.poll() is not None:
            raise AssertionError(f"serve exited with {server.returncode}:\n{log.read_text()[-3000:]}")
        try:
            return httpx.post(f"{url}/v1/artifacts", params={"name": "x.txt"}, content=b"hello", timeout=5)
        except httpx.TransportError:
            return None

    try:
        created = wait_until(answered, within=120, what=lambda: f"serve: {log.read_text()[-3000:]}")
    finally:
        stop(server)
    assert created.status_code == 201, created.text
    assert "working directory" not in log.read_text()

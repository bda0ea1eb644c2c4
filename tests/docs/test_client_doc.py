"""The examples of docs/client.md's MCP tester sections, run as written.

Each ``sh`` block runs under bash in a directory of its own that looks like the checkout (``examples`` and the
pinned npm servers' ``node_modules`` linked in, so ``npx`` downloads nothing), with ``HOME`` a temporary
directory (the store's default data directory and ``~/Pictures`` land there), the virtualenv's ``bin`` on
``PATH``, and a ``blobstore serve`` over that store standing in for ``http://127.0.0.1:8420``. ``$A`` is an
artifact of that store. The output block shown after an example must appear in what it prints, in order,
with numbers and artifact ids masked (they differ from run to run) and ``…`` lines standing for any lines.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

from tests.fixtures.server import Server, isolated_env, serving
from tests.proxy.conftest import EVERYTHING_SERVER, JS
from tests.proxy.upstream_server import photo_png

ROOT: Final = Path(__file__).resolve().parents[2]
DOC: Final = ROOT / "docs" / "client.md"
DOCUMENTED_URL: Final = "127.0.0.1:8420"
SECTIONS: Final = DOC.read_text(encoding="utf-8").split("## Calling any MCP server", 1)[1]
FENCE: Final = re.compile(r"```(\w*)\n(.*?)```", re.DOTALL)


def examples() -> list[tuple[str, str | None]]:
    """Each ``sh`` block of the sections and the plain output block right after it (if any)."""
    blocks = FENCE.findall(SECTIONS)
    found: list[tuple[str, str | None]] = []
    for index, (kind, body) in enumerate(blocks):
        if kind == "sh":
            after = blocks[index + 1] if index + 1 < len(blocks) else None
            found.append((body, after[1] if after is not None and after[0] == "" else None))
    return found


def yaml_script() -> str:
    (body,) = [body for kind, body in FENCE.findall(SECTIONS) if kind == "yaml"]
    return str(body)


def masked(line: str) -> str:
    line = re.sub(r"a_[A-Za-z0-9_-]{20,}", "a_ID", line)
    return re.sub(r"\d[\d,.]*", "N", line).rstrip()


def assert_shown(expected: str, printed: str) -> None:
    """The documented lines appear in the printed ones, in order; ``…`` stands for any lines."""
    lines = [masked(line) for line in printed.splitlines()]
    at = 0
    for wanted in (masked(line) for line in expected.splitlines() if line.strip() != "…"):
        try:
            at = lines.index(wanted, at) + 1
        except ValueError:
            pytest.fail(f"{wanted!r} is not printed (in order):\n" + "\n".join(lines))


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("home")
    (home / "Pictures").mkdir()
    (home / "Pictures" / "photo.png").write_bytes(photo_png(1600, 1200))
    return home


@pytest.fixture(scope="module")
def env(home: Path) -> dict[str, str]:
    return isolated_env(
        {
            "HOME": str(home),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}/usr/local/bin:/usr/bin:/bin",
            "COLUMNS": "200",
        }
    )


@pytest.fixture(scope="module")
def store(home: Path, env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``blobstore serve`` on the default data directory under ``HOME``, holding one photo."""
    with serving(
        tmp_path_factory.mktemp("serve"), data_dir=home / ".local" / "share" / "mcp-blobstore"
    ) as running:
        yield running


@pytest.fixture(scope="module")
def artifact(store: Server, env: dict[str, str], home: Path) -> str:
    photo = home / "upload.png"
    photo.write_bytes(photo_png(900, 700))
    uploaded = subprocess.run(
        ["blobstore", "upload", str(photo), "--json", "--url", store.url],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return str(json.loads(uploaded.stdout)[0]["artifact"]["id"])


def checkout(where: Path) -> Path:
    """A directory that looks like the checkout for the examples: ``examples``, the npm servers, a photo and
    the documented YAML script."""
    where.mkdir()
    (where / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    (where / "node_modules").symlink_to(JS / "node_modules", target_is_directory=True)
    (where / "photo.png").write_bytes(photo_png(320, 240))
    (where / "checks.yaml").write_text(yaml_script())
    return where


@pytest.mark.usefixtures("npm_servers")
@pytest.mark.parametrize(("index", "example"), list(enumerate(examples())), ids=lambda v: str(v)[:40])
def test_the_example_runs_as_written(
    index: int,
    example: tuple[str, str | None],
    tmp_path: Path,
    env: dict[str, str],
    store: Server,
    artifact: str,
) -> None:
    script, shown = example
    port = store.url.rsplit(":", 1)[1]
    command = script.replace(DOCUMENTED_URL, f"127.0.0.1:{port}")
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", command],
        cwd=checkout(tmp_path / "checkout"),
        env={**env, "A": artifact},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert done.returncode == 0, f"{script}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    if shown is not None:
        assert_shown(shown, done.stdout)


def test_every_example_is_found() -> None:
    commands = [line.split()[1] for script, _ in examples() for line in script.splitlines() if line.strip()]
    assert {"call", "tools", "resources", "read", "test"} <= set(commands)
    assert EVERYTHING_SERVER.exists()

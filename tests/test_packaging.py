"""The wheel ships every package of the tree, and the migrations from the top-level ``migrations/`` folder."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_ROOTS = ("blobstore", "mcp_resources")
MIGRATIONS_PACKAGE = "blobstore.migrations"


def tree_packages() -> set[str]:
    """Every package of the source tree, under the name it is installed as."""
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for root in PACKAGE_ROOTS
        for init in (ROOT / root).rglob("__init__.py")
    }
    return found | {MIGRATIONS_PACKAGE}


def test_every_package_of_the_tree_is_listed_for_the_wheel() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]

    assert set(config["packages"]) == tree_packages()
    assert config["package-dir"] == {MIGRATIONS_PACKAGE: "migrations"}


def test_the_wheel_holds_the_code_and_the_migrations(tmp_path: Path) -> None:
    # Built from a copy holding only what the container image copies, so that nothing else is needed.
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    for name in (*PACKAGE_ROOTS, "migrations"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    [wheel] = out.glob("mcp_blobstore-*.whl")

    names = set(zipfile.ZipFile(wheel).namelist())

    expected = {
        f"{root}/{path.relative_to(ROOT / root).as_posix()}"
        for root in PACKAGE_ROOTS
        for path in (ROOT / root).rglob("*.py")
    }
    migrations = {
        f"blobstore/migrations/{path.relative_to(ROOT / 'migrations').as_posix()}"
        for pattern in ("*.py", "*.mako")
        for path in (ROOT / "migrations").rglob(pattern)
    }
    assert "blobstore/migrations/env.py" in migrations
    assert "blobstore/migrations/script.py.mako" in migrations
    assert any(name.startswith("blobstore/migrations/versions/0001") for name in migrations)
    assert expected | migrations <= names
    assert {"blobstore/py.typed", "mcp_resources/py.typed"} <= names
    swagger = {
        f"blobstore/api/swagger/{name}"
        for name in ("swagger-ui-bundle.js", "swagger-ui.css", "start.js", "LICENSE", "NOTICE", "VERSION.md")
    }
    assert swagger <= names  # /docs works from an installed wheel, offline

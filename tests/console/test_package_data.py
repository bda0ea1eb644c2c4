"""The console's templates and files are package data: ``pip install .`` ships every one of them."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONSOLE = ROOT / "blobstore" / "api" / "console"


def test_every_template_and_static_file_is_listed_as_package_data() -> None:
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "blobstore.api.console"
    ]
    files = [
        path.relative_to(CONSOLE).as_posix()
        for folder in ("templates", "static")
        for path in (CONSOLE / folder).rglob("*")
        if path.is_file()
    ]
    assert files
    assert [name for name in files if not any(fnmatch.fnmatch(name, p) for p in patterns)] == []

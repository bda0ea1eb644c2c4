"""The code stays type-checked (mypy strict), linted and formatted (ruff), checked by the suite itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


@pytest.mark.parametrize(
    "command",
    [
        ["mypy"],
        ["ruff", "check", "."],
        ["ruff", "format", "--check", "."],
    ],
    ids=["mypy-strict", "ruff-check", "ruff-format"],
)
def test_tree_passes(command: list[str]) -> None:
    result = subprocess.run(
        [str(BIN / command[0]), *command[1:]], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]

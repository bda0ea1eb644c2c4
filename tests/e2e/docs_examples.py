"""The ``sh`` examples of ``docs/http-api.md``, found by a distinctive piece of text and run as written."""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

HTTP_API_DOC = Path(__file__).resolve().parents[2] / "docs" / "http-api.md"

_BLOCK = re.compile(r"```sh\n(.*?)```", re.DOTALL)


@cache
def blocks() -> tuple[str, ...]:
    return tuple(_BLOCK.findall(HTTP_API_DOC.read_text(encoding="utf-8")))


def block(containing: str) -> str:
    """The one example block that contains ``containing``."""
    found = [b for b in blocks() if containing in b]
    assert len(found) == 1, f"{len(found)} example blocks in {HTTP_API_DOC.name} contain {containing!r}"
    return found[0]


def line(containing: str) -> str:
    """The one example command (continuation lines joined) that contains ``containing``."""
    commands = [c for b in blocks() for c in b.replace("\\\n", " ").splitlines()]
    found = [c for c in commands if containing in c]
    assert len(found) == 1, f"{len(found)} example commands in {HTTP_API_DOC.name} contain {containing!r}"
    return found[0]


def run(script: str, cwd: Path, **variables: str) -> subprocess.CompletedProcess[bytes]:
    """Run an example with bash, the doc's shell variables (``B``, ``U``, ``A``, ``SHA``) set; fail loudly."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", **variables}
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, f"{script!r} failed ({result.returncode}): {result.stderr.decode()}"
    return result

"""The HTTP edge and the MCP edge do not import each other; what both hand out lives below them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def imported_modules(package: Path) -> dict[str, set[str]]:
    """Every module each file of ``package`` imports, at the top or inside a function."""
    found: dict[str, set[str]] = {}
    for path in sorted(package.rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
        found[str(path.relative_to(ROOT))] = names
    return found


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [("blobstore/api", "mcp_resources"), ("mcp_resources", "blobstore.api")],
)
def test_an_edge_never_imports_the_other(package: str, forbidden: str) -> None:
    offending = {
        path: sorted(name for name in names if name == forbidden or name.startswith(forbidden + "."))
        for path, names in imported_modules(ROOT / package).items()
    }
    assert {path: names for path, names in offending.items() if names} == {}


def test_the_shared_link_and_size_helpers_need_no_mcp_sdk() -> None:
    for path, names in imported_modules(ROOT / "blobstore").items():
        if path in ("blobstore/links.py", "blobstore/units.py", "blobstore/models.py"):
            assert not {name for name in names if name == "mcp" or name.startswith("mcp.")}, path

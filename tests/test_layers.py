"""The layers of docs/architecture.md, checked by import-linter over both root packages.

The contracts live in ``pyproject.toml`` (``[tool.importlinter]``). Every module has a place in the layers,
and an import hidden in a function body or under ``TYPE_CHECKING`` counts like any other.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint_imports(cwd: Path, *, pythonpath: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _contract(contract_id: str) -> dict[str, Any]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    found: dict[str, Any] = next(c for c in config["contracts"] if c["id"] == contract_id)
    return found


def test_the_import_contracts_are_kept() -> None:
    result = _lint_imports(ROOT, pythonpath=ROOT)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]


def test_every_module_has_a_place_in_the_layers() -> None:
    placed = {
        name.strip()
        for layer in _contract("layers")["layers"]
        for name in layer.strip("()").replace("|", ":").split(":")
    }
    modules = {
        f"blobstore.{path.stem if path.is_file() else path.name}"
        for path in (ROOT / "blobstore").iterdir()
        if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").is_file()
    }
    assert "mcp_resources" in placed
    assert sorted(modules - placed) == []


_CODE_SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_MODULE_PATH = re.compile(r"^((?:blobstore|mcp_resources)/[\w/]*?(?:\.py|/))(?![\w])")
_DOTTED_NAME = re.compile(r"^((?:blobstore|mcp_resources)(?:\.[A-Za-z_]\w*)+)")


def _resolves(name: str) -> bool:
    """Whether ``a.b.c`` is a module, or an attribute path under the longest module prefix of it."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(found, attr):
                return False
            found = getattr(found, attr)
        return True
    return False


def test_every_module_the_docs_name_is_where_they_say() -> None:
    # The docs name files (`mcp_resources/reading/views.py`) and import paths
    # (`mcp_resources.embed.FileInput`) in inline code; after a move they must follow. Logger names look like
    # module paths and are not.
    docs = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
    missing: list[str] = []
    for doc in docs:
        text = doc.read_text(encoding="utf-8")
        for span in _CODE_SPAN.finditer(text):
            code = span.group(1)
            if text[: span.start()].endswith("logger "):
                continue
            if (path := _MODULE_PATH.match(code)) and not (ROOT / path.group(1)).exists():
                missing.append(f"{doc.name}: {code}")
            if (dotted := _DOTTED_NAME.match(code)) and not _resolves(dotted.group(1)):
                missing.append(f"{doc.name}: {code}")
    assert missing == []


@pytest.mark.parametrize(
    "hidden_import",
    [
        "def late() -> None:\n    import layered.high  # noqa: F401\n",
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from layered import high  # noqa: F401\n",
    ],
    ids=["function-body", "type-checking"],
)
def test_a_hidden_upward_import_breaks_a_layers_contract(tmp_path: Path, hidden_import: str) -> None:
    package = tmp_path / "layered"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "high.py").write_text("")
    (package / "low.py").write_text(hidden_import)
    (tmp_path / ".importlinter").write_text(
        "[importlinter]\nroot_package = layered\n\n[importlinter:contract:layers]\nname = layers\n"
        "type = layers\nlayers =\n    layered.high\n    layered.low\n"
    )

    result = _lint_imports(tmp_path, pythonpath=tmp_path)

    assert result.returncode != 0
    assert "layered.low is not allowed to import layered.high" in result.stdout

"""The MCP Inspector as docs/mcp.md tells to use it, in the version Node 20 gets: 0.15.0.

On a Node older than 22.19, ``npx @modelcontextprotocol/inspector`` installs 0.15.0, the newest release
without an ``engines`` requirement (checked with ``npm view @modelcontextprotocol/inspector engines
versions`` when this was written: 2.x needs ``>=22.19.0``, 0.16 to 1.x ``>=22.7.5``). That version is pinned
in ``tests/mcp/inspector`` (installed by ``.ci/run``); its CLI mode runs the documented command against
``blobstore mcp``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import anyio

from blobstore.config import Settings
from blobstore.runtime import open_service
from tests.mcp.conftest import INSPECTOR_PACKAGE, NPX_PREFIX, put

ROOT = Path(__file__).resolve().parents[2]
MCP_DOC = ROOT / "docs" / "mcp.md"


def documented_cli_command() -> list[str]:
    text = MCP_DOC.read_text(encoding="utf-8")
    found = [line for line in re.findall(r"^npx .*$", text, re.MULTILINE) if "--cli blobstore mcp" in line]
    assert len(found) == 1, found
    return shlex.split(found[0])


def test_the_inspector_version_node_20_gets_is_the_one_the_docs_name(inspector: Path) -> None:
    installed = json.loads((INSPECTOR_PACKAGE / "package.json").read_text())
    assert installed["version"] == "0.15.0"
    assert "engines" not in installed  # why npm falls back to it on an older Node
    text = " ".join(MCP_DOC.read_text(encoding="utf-8").split())
    assert "The current Inspector (2.x) needs Node.js 22.19 or newer" in text
    assert "npm quietly installs 0.15.0, the newest release that declares no Node requirement" in text


async def _one_artifact(data_dir: Path) -> str:
    async with open_service(Settings(data_dir=data_dir)) as service:
        return (await put(service, b"seen by the inspector", "inspected.txt", "text/plain")).uri


def test_the_documented_inspector_cli_command_lists_the_store_over_stdio(
    inspector: Path, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    uri = anyio.run(_one_artifact, data_dir)

    command = documented_cli_command()
    assert " ".join(command[:2]) == NPX_PREFIX
    args = [str(data_dir) if arg == "/path/to/data" else arg for arg in command[2:]]
    # `blobstore` found on PATH, as the docs assume (README, "Using it"): the virtualenv's bin directory.
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env = {k: v for k, v in env.items() if not k.startswith("BLOBSTORE_")}
    done = subprocess.run([str(inspector), *args], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    assert [(r["uri"], r["name"]) for r in listed["resources"]] == [(uri, "inspected.txt")]

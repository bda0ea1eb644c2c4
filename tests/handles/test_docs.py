"""The examples of docs/mcp.md's "Files as tool arguments" and of docs/proxy.md's "Passing artifacts to
tools" are what the code has and does."""

from __future__ import annotations

import json
import re
from pathlib import Path

from mcp_resources import files_capability
from mcp_resources.binary_schema import HANDLE_HINT, HANDLE_PATTERN, MIN_HANDLE_LENGTH
from mcp_resources.file_params import FILE_SCHEMA
from mcp_resources.uris import MAX_URI_LENGTH

ROOT = Path(__file__).resolve().parents[2]
MCP_DOC = (ROOT / "docs" / "mcp.md").read_text(encoding="utf-8")
ARGUMENTS_DOC = (ROOT / "docs" / "proxy.md").read_text(encoding="utf-8")


def block(doc: str, language: str, containing: str) -> str:
    found = [b for b in re.findall(rf"```{language}\n(.*?)```", doc, re.DOTALL) if containing in b]
    assert len(found) == 1
    return str(found[0])


def test_the_documented_file_parameter_schema_is_the_one_tools_list_gives() -> None:
    assert json.loads(block(MCP_DOC, "json", '"x-blobstore-file"')) == FILE_SCHEMA


def test_the_documented_example_is_the_example_servers_code() -> None:
    example = (ROOT / "examples" / "file_tool_server.py").read_text(encoding="utf-8")
    for line in block(MCP_DOC, "python", "checksum_image").splitlines():
        assert line in example.splitlines(), line


def test_the_documented_widening_is_the_codes() -> None:
    assert f"; {HANDLE_HINT}" in ARGUMENTS_DOC
    assert f"`(?:P)|{HANDLE_PATTERN}`" in ARGUMENTS_DOC
    assert f"below {MAX_URI_LENGTH} becomes {MAX_URI_LENGTH}" in ARGUMENTS_DOC
    assert (
        f"above {MIN_HANDLE_LENGTH} (the shortest artifact URI) becomes {MIN_HANDLE_LENGTH}" in ARGUMENTS_DOC
    )
    assert f"a `maxLength`\nbelow {MAX_URI_LENGTH}, a `minLength` above {MIN_HANDLE_LENGTH}" in MCP_DOC


def test_the_documented_files_capability_and_draft_revision_are_the_codes() -> None:
    assert files_capability.__doc__ is not None
    revision = re.search(r"commit ``([0-9a-f]{40})``", files_capability.__doc__)
    assert revision is not None
    flowing = " ".join(MCP_DOC.split())
    assert f"commit `{revision.group(1)}`" in flowing
    assert f"`experimental: {json.dumps(files_capability.CAPABILITY)}`" in flowing
    documented = json.loads(block(MCP_DOC, "json", '"Tus-Resumable"'))
    assert documented["upload"]["headers"] == files_capability.TUS_HEADERS

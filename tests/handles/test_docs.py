"""The examples of docs/mcp.md's "Files as tool arguments" and of docs/proxy.md's "Passing artifacts to
tools" are what the code has and does."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from mcp import Client

from blobstore.config import Settings
from blobstore.runtime import open_service
from mcp_resources.proxy.rules import HOST_PROFILES
from mcp_resources.tools import files_capability
from mcp_resources.tools.binary_schema import HANDLE_HINT, HANDLE_PATTERN, MIN_HANDLE_LENGTH
from mcp_resources.tools.file_params import FILE_SCHEMA
from mcp_resources.uris import MAX_URI_LENGTH

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
import media_tool_server  # noqa: E402 - the example is imported from its directory, as mypy_path says

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


def test_the_documented_media_example_is_the_example_servers_code() -> None:
    example = (ROOT / "examples" / "media_tool_server.py").read_text(encoding="utf-8").splitlines()
    for line in block(MCP_DOC, "python", "transcribe_audio").splitlines():
        assert line in example, line


async def test_the_documented_typed_schema_and_result_are_what_the_example_answers(tmp_path: Path) -> None:
    async with (
        open_service(Settings(data_dir=tmp_path / "data")) as service,
        Client(media_tool_server.build_server(service)) as client,
    ):
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        made = await client.call_tool(
            "generate_image", {"prompt": "a green field", "width": 96, "height": 64}
        )
    listed = dict(tools["analyze_image"].input_schema["properties"]["image"])
    for key in ("anyOf", "x-blobstore-file", "title"):
        listed.pop(key)
    assert json.loads(block(MCP_DOC, "json", '"x-blobstore-media"')) == listed
    line = (tools["analyze_image"].description or "").split("\n\n")[-1]
    flowing = " ".join(MCP_DOC.split())
    assert line.startswith(
        "Files: image: an image (png, jpeg, webp or gif, at most 10 MB, 40,000,000 pixels)."
    )
    assert f"(`{line[: line.index('. Each') + len('. Each as an artifact URI')]} …`)" in flowing
    documented = json.loads(
        block(MCP_DOC, "json", '"a-green-field.png"').replace('"…"', '"x"').replace("a_…", "a_x")
    )
    assert made.structured_content is not None
    answered = made.structured_content["result"]
    for key in ("type", "name", "mimeType", "size", "format", "width", "height"):
        assert documented["result"][key] == answered[key], key


def test_the_platform_table_is_what_the_bench_measures() -> None:
    done = subprocess.run(
        [sys.executable, "bench/media_platforms.py"], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-2000:]
    measured = done.stdout.strip().splitlines()
    assert len(measured) == 2 + len(HOST_PROFILES)
    documented = MCP_DOC.splitlines()
    start = documented.index(measured[0])
    assert documented[start : start + len(measured)] == measured

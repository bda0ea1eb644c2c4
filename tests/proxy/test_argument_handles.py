"""Artifact URIs as tool arguments through ``blobstore proxy``: real processes, the official Python client.

The upstream (``artifact_tools_upstream.py``) makes a 3000 by 2000 screenshot and checksums a base64 image;
the model's path is the screenshot's ``resource_link`` passed back as ``checksum_image(image=uri)``, and the
proxy puts the bytes in. A meter between the client and the proxy (``wire_meter.py``) logs the size of every
message either way.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.types import CallToolResult, ResourceLink, TextContent, Tool

from blobstore.config import Settings
from blobstore.models import Artifact, Caller
from blobstore.runtime import open_service
from mcp_resources.tools.binary_schema import HANDLE_HINT
from mcp_resources.tools.handles import CAP_SETTING
from tests.handles.conftest import expired
from tests.proxy.conftest import HERE, NAMESPACE, blobstore_command, proxy_args
from tests.proxy.test_ts_client import ts_client
from tests.proxy.upstream_server import photo_png

MODES = ["legacy", "auto"]
UPSTREAM = HERE / "artifact_tools_upstream.py"
METER = HERE / "wire_meter.py"
SCREENSHOT = photo_png(3000, 2000)


class Rig:
    """Where the upstream records its calls and the meter the message sizes."""

    def __init__(self, tmp_path: Path) -> None:
        self.data_dir = tmp_path / "data"
        self.calls = tmp_path / "calls.jsonl"
        self.wire = tmp_path / "wire.log"

    def params(self, env: dict[str, str] | None = None) -> StdioServerParameters:
        proxy = [
            blobstore_command(),
            *proxy_args(self.data_dir, [sys.executable, str(UPSTREAM), str(self.calls)]),
        ]
        return StdioServerParameters(
            command=sys.executable,
            args=[str(METER), str(self.wire), *proxy],
            env={**os.environ, **(env or {})},
        )

    def received(self) -> list[dict[str, Any]]:
        """The calls that reached the upstream."""
        if not self.calls.exists():
            return []
        return [json.loads(line) for line in self.calls.read_text().splitlines()]

    def largest(self, mark: str) -> int:
        sizes = [int(line[2:]) for line in self.wire.read_text().splitlines() if line.startswith(mark)]
        assert sizes
        return max(sizes)


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    return Rig(tmp_path)


def text(result: CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, TextContent))


async def screenshot_link(client: Client) -> str:
    shot = await client.call_tool("make_screenshot", {})
    links = [block for block in shot.content if isinstance(block, ResourceLink)]
    assert len(links) == 1
    assert links[0].size == len(SCREENSHOT)
    return str(links[0].uri)


async def all_tools(client: Client) -> list[list[Tool]]:
    pages: list[list[Tool]] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor)
        pages.append(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return pages


@pytest.mark.parametrize("mode", MODES)
async def test_a_screenshots_link_passed_back_brings_the_original_bytes_and_no_message_is_large(
    rig: Rig, mode: str
) -> None:
    async with Client(rig.params(), mode=mode) as client:
        uri = await screenshot_link(client)
        result = await client.call_tool("checksum_image", {"image": uri})
    assert not result.is_error
    assert text(result) == hashlib.sha256(SCREENSHOT).hexdigest()
    checked = [call for call in rig.received() if call["tool"] == "checksum_image"]
    assert len(checked) == 1
    assert checked[0]["arguments"]["image"]["length"] > len(SCREENSHOT)  # the base64 of it
    inline_limit = Settings().inline_limit
    assert rig.largest(">") <= inline_limit
    assert rig.largest("<") <= inline_limit


@pytest.mark.parametrize("mode", MODES)
async def test_tools_list_says_where_a_handle_is_accepted_on_every_page(rig: Rig, mode: str) -> None:
    async with Client(rig.params(), mode=mode) as client:
        first, second = await all_tools(client)
    image = next(tool for tool in first if tool.name == "checksum_image").input_schema["properties"]["image"]
    assert image["description"] == f"The PNG to check, base64; {HANDLE_HINT}"
    assert image["contentEncoding"] == "base64"
    assert image["contentMediaType"] == "image/png"
    note = next(tool for tool in second if tool.name == "annotate").input_schema["properties"]["note"]
    assert note == {"type": "string", "description": "A note to keep"}
    read = next(tool for tool in second if tool.name == "read_artifact")
    # Claude Code writes a longer result to a file unless the tool raises its threshold.
    assert (read.meta or {})["anthropic/maxResultSizeChars"] == 500_000


async def stored_elsewhere(data_dir: Path) -> tuple[Artifact, Artifact]:
    """An artifact of another namespace, and one of the proxy's namespace that expired an hour ago."""
    async with open_service(Settings(data_dir=data_dir), migrate=True) as service:

        async def one() -> AsyncIterator[bytes]:
            yield SCREENSHOT

        foreign = await service.create_artifact(
            Caller(namespace="someone-else"),
            one(),
            name="theirs.png",
            mime_type="image/png",
            expected_size=len(SCREENSHOT),
        )
        gone = await expired(service, foreign, namespace=NAMESPACE)
    return foreign, gone


@pytest.mark.parametrize("mode", MODES)
async def test_foreign_guessed_and_expired_handles_are_the_same_not_found_and_nothing_goes_upstream(
    rig: Rig, mode: str
) -> None:
    foreign, expired = await stored_elsewhere(rig.data_dir)
    guessed = "blobstore://artifacts/a_" + "x" * 24
    errors = []
    async with Client(rig.params(), mode=mode) as client:
        for uri in (foreign.uri, guessed, expired.uri):
            result = await client.call_tool("checksum_image", {"image": uri})
            assert result.is_error
            assert result.structured_content is not None
            error = result.structured_content["error"]
            errors.append((error["code"], error["message"], text(result)))
    assert (
        errors
        == [("not_found", "image: artifact not found", "Error (not_found): image: artifact not found")] * 3
    )
    assert rig.received() == []


@pytest.mark.parametrize("mode", MODES)
async def test_a_handle_over_the_argument_cap_is_refused_naming_the_cap(rig: Rig, mode: str) -> None:
    cap = len(SCREENSHOT) - 1
    async with Client(rig.params({CAP_SETTING: str(cap)}), mode=mode) as client:
        uri = await screenshot_link(client)
        result = await client.call_tool("checksum_image", {"image": uri})
    assert result.is_error
    assert result.structured_content is not None
    assert result.structured_content["error"]["code"] == "limit_exceeded"
    assert result.structured_content["error"]["maxArgumentBytes"] == cap
    assert CAP_SETTING in text(result)
    assert [call["tool"] for call in rig.received()] == ["make_screenshot"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_handle_where_the_schema_wants_plain_text_is_passed_as_the_string(
    rig: Rig, mode: str
) -> None:
    async with Client(rig.params(), mode=mode) as client:
        uri = await screenshot_link(client)
        result = await client.call_tool("annotate", {"note": uri})
    assert text(result) == uri
    noted = [call for call in rig.received() if call["tool"] == "annotate"]
    assert noted[0]["arguments"]["note"]["head"] == uri


async def test_the_typescript_client_passes_the_screenshots_link_back_and_gets_its_checksum(rig: Rig) -> None:
    upstream = [sys.executable, str(UPSTREAM), str(rig.calls)]
    calls: list[tuple[str, dict[str, Any]]] = [
        ("make_screenshot", {}),
        ("checksum_image", {"image": "$last_link"}),
    ]
    out = await ts_client(
        sys.executable,
        [str(METER), str(rig.wire), blobstore_command(), *proxy_args(rig.data_dir, upstream)],
        calls,
        read_links=False,
    )
    assert out["tools"] == ["make_screenshot", "checksum_image"]
    assert any(block["type"] == "resource_link" for block in out["results"][0]["content"])
    checked = out["results"][1]
    assert "isError" not in checked or not checked["isError"]
    assert checked["content"][0]["text"] == hashlib.sha256(SCREENSHOT).hexdigest()
    inline_limit = Settings().inline_limit
    assert rig.largest(">") <= inline_limit
    assert rig.largest("<") <= inline_limit

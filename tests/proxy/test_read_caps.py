"""Every read of a stored artifact through the proxy fits the host profile's caps, asked with no window too.

A text the proxy stored is read back the obvious way, ``read_artifact(uri)`` and ``resources/read`` of the
bare URI: when the whole does not fit the profile, the answer is the first window and how to read the next;
when it fits, the whole. The upstreams are real: server-everything's ``echo`` and an ``MCPServer`` tool whose
text the SDK mirrors in ``structuredContent``.
"""

from __future__ import annotations

import base64
import json
import re
import sys
from pathlib import Path
from typing import Any, Final

import pytest

from mcp_resources.proxy.measure import measure
from tests.proxy.conftest import (
    HERE,
    RawPeer,
    call,
    everything_upstream,
    link_of,
    proxy_command,
    raw_peer,
    stored,
)
from tests.proxy.mcpserver_upstream import numbered_lines

DOC: Final = Path(__file__).resolve().parents[2] / "docs" / "proxy.md"
MCPSERVER_UPSTREAM: Final = [sys.executable, str(HERE / "mcpserver_upstream.py")]
CLAUDE_CODE_BYTES: Final = 25_000 * 4
"""The claude-code profile's 25,000 tokens, at the proxy's four bytes a token."""
WINDOW: Final = 64 * 1024
"""The window that fits claude-code's caps (docs/proxy.md, "Host profiles")."""
TEXT_CHARS: Final = 240_000


def _fits_claude_code(line: bytes) -> None:
    assert len(line) <= CLAUDE_CODE_BYTES, len(line)
    result = json.loads(line).get("result")
    if result is not None:
        _size, tokens = measure(result)
        assert tokens <= 25_000, tokens


def _window_of(answer: dict[str, Any]) -> tuple[bytes, dict[str, Any]]:
    """The bytes and window ``_meta`` of a read_artifact or resources/read answer."""
    result = answer["result"]
    if "contents" in result:
        (contents,) = result["contents"]
    else:
        (contents,) = [block["resource"] for block in result["content"] if block["type"] == "resource"]
    data = base64.b64decode(contents["blob"]) if "blob" in contents else contents["text"].encode()
    return data, contents["_meta"]["dev.blobstore/window"]


async def _read_both_ways(peer: RawPeer, uri: str) -> tuple[dict[str, Any], dict[str, Any]]:
    tool = await peer.request(10, "tools/call", {"name": "read_artifact", "arguments": {"uri": uri}})
    resource = await peer.request(11, "resources/read", {"uri": uri})
    _fits_claude_code(tool)
    _fits_claude_code(resource)
    return json.loads(tool), json.loads(resource)


@pytest.mark.usefixtures("npm_servers")
async def test_an_echo_over_the_cap_is_read_back_first_window_first(data_dir: Path) -> None:
    message = numbered_lines(TEXT_CHARS)
    whole = f"Echo: {message}".encode()
    command = proxy_command(data_dir, everything_upstream(), "--host-profile", "claude-code")
    async with raw_peer(command) as peer:
        await peer.handshake()
        link = link_of(await call(peer, 1, "echo", {"message": message}))
        assert link["size"] == len(whole)
        tool, resource = await _read_both_ways(peer, link["uri"])
        assert await peer.close() == 0
    for answer in (tool, resource):
        data, window = _window_of(answer)
        assert data == whole[:WINDOW]
        assert (window["offset"], window["length"], window["size"]) == (0, WINDOW, len(whole))
        assert window["next"] == f"{link['uri']}?offset={WINDOW}&length={WINDOW}"
    summary = tool["result"]["content"][0]["text"]
    assert f"bytes 0-{WINDOW} of {len(whole)}" in summary
    assert f"Next: read_artifact(uri, offset={WINDOW}, length={WINDOW})" in summary
    # docs/proxy.md shows this answer's lines.
    (documented,) = re.findall(r"```text\n(blobstore://.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    assert summary.replace(link["uri"], "blobstore://artifacts/a_…") == documented.strip()


async def test_a_text_the_sdk_mirrors_in_structured_content_is_stored_once_and_read_back_within_the_cap(
    data_dir: Path,
) -> None:
    text = numbered_lines(TEXT_CHARS)
    command = proxy_command(data_dir, MCPSERVER_UPSTREAM, "--host-profile", "claude-code")
    async with raw_peer(command) as peer:
        await peer.handshake()
        answer = await call(peer, 1, "long_text", {"chars": TEXT_CHARS})
        link = link_of(answer)
        tool, resource = await _read_both_ways(peer, link["uri"])
        assert await peer.close() == 0
    result = answer["result"]
    # The mirror names the stored text instead of repeating it; the schema (a string) still holds.
    assert result["structuredContent"] == {"result": link["uri"]}
    assert "isError" not in result or result["isError"] is False
    assert result["content"][0]["text"].startswith(text[:1000])
    (artifact,) = await stored(data_dir)
    assert (artifact.size, artifact.mime_type) == (TEXT_CHARS, "text/plain")
    for read in (tool, resource):
        data, window = _window_of(read)
        assert data == text.encode()[:WINDOW]
        assert window["next"] == f"{link['uri']}?offset={WINDOW}&length={WINDOW}"


async def test_an_artifact_that_fits_the_cap_is_still_read_whole(data_dir: Path) -> None:
    text = numbered_lines(60_000)
    command = proxy_command(data_dir, MCPSERVER_UPSTREAM, "--host-profile", "claude-code")
    async with raw_peer(command) as peer:
        await peer.handshake()
        link = link_of(await call(peer, 1, "long_text", {"chars": 60_000}))
        tool, resource = await _read_both_ways(peer, link["uri"])
        assert await peer.close() == 0
    for read in (tool, resource):
        data, window = _window_of(read)
        assert data == text.encode()
        assert (window["offset"], window["size"], window["eof"], window["next"]) == (0, 60_000, True, None)

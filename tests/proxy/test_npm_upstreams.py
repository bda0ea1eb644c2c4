"""``blobstore proxy`` in front of the reference npm servers (server-filesystem, server-everything).

Raw comparisons use :class:`~tests.proxy.conftest.RawPeer`: the same requests, with the same ids, sent to the
upstream directly and through the proxy, and the response lines compared as bytes.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.types import (
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    ImageContent,
    ListRootsResult,
    LoggingMessageNotificationParams,
    PromptReference,
    ResourceLink,
    Root,
    TextContent,
)
from PIL import Image

from mcp_resources.reading.views import view_templates
from tests.fixtures.png_chunks import tiny_image_png
from tests.proxy.conftest import (
    PYTHON_UPSTREAM,
    TIMEOUT,
    direct_params,
    everything_upstream,
    filesystem_upstream,
    proxy_command,
    proxy_params,
    raw_peer,
)
from tests.proxy.test_passthrough import read_whole, wire
from tests.proxy.upstream_server import photo_png

pytestmark = pytest.mark.usefixtures("npm_servers")


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("files")
    (root / "photo.png").write_bytes(photo_png(3000, 2000))
    (root / "notes.txt").write_text("first line\nsecond line\n")
    (root / "sub").mkdir()
    (root / "sub" / "deep.txt").write_text("deep\n")
    return root


async def raw_session(command: list[str], calls: list[tuple[str, dict[str, Any]]]) -> list[bytes]:
    """The raw response lines of ``calls`` (ids 1, 2, ...) after a 2025-11-25 handshake. The peer offers no
    roots: server-filesystem asks a client that does for them, and one that never answers keeps it from
    exiting until its request times out (a minute)."""
    async with raw_peer(command) as peer:
        await peer.handshake(capabilities={})
        lines = [await peer.request(i, method, params) for i, (method, params) in enumerate(calls, start=1)]
        await peer.close()
    return lines


async def test_results_with_nothing_to_offload_are_the_upstreams_bytes(files: Path, data_dir: Path) -> None:
    calls: list[tuple[str, dict[str, Any]]] = [
        ("tools/call", {"name": "list_directory", "arguments": {"path": str(files)}}),
        ("tools/call", {"name": "read_text_file", "arguments": {"path": str(files / "notes.txt")}}),
        ("tools/call", {"name": "directory_tree", "arguments": {"path": str(files)}}),
        ("tools/call", {"name": "get_file_info", "arguments": {"path": str(files / "sub" / "deep.txt")}}),
        ("tools/call", {"name": "list_allowed_directories", "arguments": {}}),
        ("tools/call", {"name": "read_text_file", "arguments": {"path": "/etc/passwd"}}),
    ]
    direct = await raw_session(filesystem_upstream(files), calls)
    proxied = await raw_session(proxy_command(data_dir, filesystem_upstream(files)), calls)
    assert b"deep.txt" in direct[2]
    assert b"isError" in direct[5]
    assert proxied == direct


async def test_python_upstream_small_results_are_the_upstreams_bytes(data_dir: Path) -> None:
    calls: list[tuple[str, dict[str, Any]]] = [
        ("tools/call", {"name": "echo", "arguments": {"text": "hello \u00e9\u6f22"}}),
        ("tools/call", {"name": "structured", "arguments": {}}),
        ("prompts/get", {"name": "greet"}),
        ("resources/read", {"uri": "test://small.txt"}),
        ("ping", {}),
    ]
    direct = await raw_session(PYTHON_UPSTREAM, calls)
    proxied = await raw_session(proxy_command(data_dir, PYTHON_UPSTREAM), calls)
    assert proxied == direct


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_read_media_file_photo_is_downscaled_and_linked_to_the_original(
    files: Path, data_dir: Path, mode: str
) -> None:
    original = (files / "photo.png").read_bytes()
    async with Client(proxy_params(data_dir, filesystem_upstream(files)), mode=mode) as client:
        result = await client.call_tool("read_media_file", {"path": str(files / "photo.png")})
        assert len(json.dumps(wire(result))) < 512 * 1024
        images = [b for b in result.content if isinstance(b, ImageContent)]
        assert len(images) == 1
        assert max(Image.open(io.BytesIO(base64.b64decode(images[0].data))).size) <= 1024
        links = [b for b in result.content if isinstance(b, ResourceLink)]
        assert len(links) == 1
        assert await read_whole(client, str(links[0].uri)) == original
        listing = await client.call_tool("list_directory", {"path": str(files)})
    async with Client(direct_params(filesystem_upstream(files)), mode=mode) as direct:
        assert wire(await direct.call_tool("list_directory", {"path": str(files)})) == wire(listing)


async def test_everything_server_passthrough_equals_the_direct_calls(data_dir: Path) -> None:
    async def session(client: Client) -> dict[str, Any]:
        pages: list[Any] = []
        cursor: str | None = None
        while True:
            page = await client.list_resources(cursor=cursor)
            pages.extend(str(r.uri) for r in page.resources)
            cursor = page.next_cursor
            if cursor is None:
                break
        tools = wire(await client.list_tools())
        with warnings.catch_warnings():
            # Deprecated in 2026-07-28, still part of the handshake era spoken here.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            ping = wire(await client.send_ping())
            log = wire(await client.set_logging_level("error"))
        return {
            "tools": [t for t in tools["tools"] if t["name"] != "read_artifact"],
            "prompts": wire(await client.list_prompts()),
            "simple": wire(await client.get_prompt("simple-prompt")),
            "echo": wire(await client.call_tool("echo", {"message": "hi"})),
            "sum": wire(await client.call_tool("get-sum", {"a": 2, "b": 3})),
            "structured": wire(await client.call_tool("get-structured-content", {"location": "New York"})),
            "tiny": wire(await client.call_tool("get-tiny-image", {})),
            "resources": pages,
            "templates": [
                t["uriTemplate"] for t in wire(await client.list_resource_templates())["resourceTemplates"]
            ],
            "complete": wire(
                await client.complete(
                    PromptReference(name="completable-prompt"), {"name": "department", "value": "E"}
                )
            ),
            "ping": ping,
            "log": log,
        }

    async with Client(direct_params(everything_upstream()), mode="legacy") as direct:
        expected = await session(direct)
    async with Client(proxy_params(data_dir, everything_upstream()), mode="legacy") as proxied:
        got = await session(proxied)
    store_templates = [
        "blobstore://artifacts/{artifact_id}{?offset,length}",
        *(template.uri_template for template in view_templates()),
    ]
    assert got["templates"] == [*expected["templates"], *store_templates]
    assert expected["resources"]
    assert got["resources"] == expected["resources"]
    # The tiny image (20x20, an iCCP chunk whose CRC fails, shown by every browser) is within every budget:
    # it passes as the upstream sent it, like every other answer.
    (image,) = [block for block in expected["tiny"]["content"] if block["type"] == "image"]
    assert base64.b64decode(image["data"]) == tiny_image_png()
    for key in expected:
        if key != "templates":
            assert got[key] == expected[key], key


async def test_the_tiny_image_stored_by_rule_is_shown_read_and_cut_as_browsers_show_it(
    data_dir: Path, tmp_path: Path
) -> None:
    config = tmp_path / "offload.toml"
    config.write_text('always_offload = ["get-tiny-image"]\n')
    params = proxy_params(data_dir, everything_upstream(), "--offload-config", str(config))
    async with Client(params, mode="legacy") as client:
        result = await client.call_tool("get-tiny-image", {})
        (link,) = [b for b in result.content if isinstance(b, ResourceLink)]
        region = await client.call_tool("read_artifact", {"uri": str(link.uri), "region": "0,0,10,20"})
    lines = [b.text for b in result.content if isinstance(b, TextContent)]
    (image,) = [b for b in result.content if isinstance(b, ImageContent)]
    assert base64.b64decode(image.data) == tiny_image_png()
    assert any(line.startswith("[image shown inline at 20x20 px") for line in lines), lines
    assert link.description is not None
    assert "20x20 px" in link.description
    assert not region.is_error, region.content
    (cut,) = [b for b in region.content if isinstance(b, ImageContent)]
    assert Image.open(io.BytesIO(base64.b64decode(cut.data))).size == (10, 20)


async def test_server_requests_of_a_real_server_reach_the_client_and_back(data_dir: Path) -> None:
    asked: list[str] = []

    async def sampling(context: Any, params: CreateMessageRequestParams) -> CreateMessageResult:
        first = params.messages[0].content
        asked.append(first.text if isinstance(first, TextContent) else "")
        return CreateMessageResult(role="assistant", content=TextContent(text="sampled answer"), model="m")

    async def elicitation(context: Any, params: ElicitRequestParams) -> ElicitResult:
        asked.append("elicit")
        return ElicitResult(action="decline")

    async def roots(context: Any) -> ListRootsResult:
        asked.append("roots")
        return ListRootsResult(roots=[Root(uri="file:///tmp/proxy-root", name="proxy-root")])

    async with Client(
        proxy_params(data_dir, everything_upstream()),
        mode="legacy",
        sampling_callback=sampling,
        elicitation_callback=elicitation,
        list_roots_callback=roots,
    ) as client:
        sampled = await client.call_tool(
            "trigger-sampling-request", {"prompt": "hello model", "maxTokens": 20}
        )
        elicited = await client.call_tool("trigger-elicitation-request", {})
        rooted = await client.call_tool("get-roots-list", {})
    # server-everything may ask for the roots on its own once initialized, before or after the sampling.
    assert any("hello model" in question for question in asked), asked
    assert "sampled answer" in json.dumps(wire(sampled))
    assert "elicit" in asked
    assert "decline" in json.dumps(wire(elicited)).lower()
    assert "proxy-root" in json.dumps(wire(rooted))


async def test_log_messages_of_a_real_server_reach_the_client(data_dir: Path) -> None:
    received = asyncio.Event()
    levels: list[str] = []

    async def on_log(params: LoggingMessageNotificationParams) -> None:
        levels.append(params.level)
        received.set()

    async with Client(
        proxy_params(data_dir, everything_upstream()), mode="legacy", logging_callback=on_log
    ) as client:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.set_logging_level("debug")
        await client.call_tool("toggle-simulated-logging", {})
        await asyncio.wait_for(received.wait(), TIMEOUT)
        await client.call_tool("toggle-simulated-logging", {})
    assert levels

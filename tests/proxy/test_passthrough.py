"""``blobstore proxy`` in front of a Python upstream, driven by the official Python client in both eras.

Everything the upstream offers reaches the client as a direct connection sees it; the store's resources and
read tool come after the upstream's; progress and sampling travel both ways; a dead upstream is an error.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError
from mcp.types import (
    BlobResourceContents,
    CreateMessageRequestParams,
    CreateMessageResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
)
from PIL import Image

from blobstore.config import Settings
from blobstore.models import Caller
from blobstore.runtime import open_service
from mcp_resources.reading.views import view_templates
from tests.fixtures.waiting import wait_until_async
from tests.proxy.conftest import (
    NAMESPACE,
    PYTHON_UPSTREAM,
    TIMEOUT,
    direct_params,
    proxy_command,
    proxy_params,
    raw_peer,
)
from tests.proxy.upstream_server import pdf_like, photo_png, text_of

MODES = ["legacy", "auto"]
STORE_TEMPLATE = "blobstore://artifacts/{artifact_id}{?offset,length}"


def wire(model: Any) -> Any:
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


def without_era_stamps(value: Any) -> Any:
    """A result without the per-response stamps of the 2026 era (server info, caching hints)."""
    if isinstance(value, dict):
        return {
            k: without_era_stamps(v)
            for k, v in value.items()
            if k not in ("ttlMs", "cacheScope", "resultType") and k != "io.modelcontextprotocol/serverInfo"
        }
    if isinstance(value, list):
        return [without_era_stamps(v) for v in value]
    return value


async def read_whole(client: Client, uri: str) -> bytes:
    """Every window of a store URI, read through ``client``, concatenated."""
    out = bytearray()
    next_uri: str | None = f"{uri}?offset=0&length=1048576"
    while next_uri is not None:
        result = await client.read_resource(next_uri)
        contents = result.contents[0]
        assert isinstance(contents, BlobResourceContents)
        out += base64.b64decode(contents.blob)
        next_uri = (contents.meta or {})["dev.blobstore/window"]["next"]
    return bytes(out)


@pytest.mark.parametrize("mode", MODES)
async def test_every_passthrough_call_equals_the_direct_call(data_dir: Path, mode: str) -> None:
    async with Client(direct_params(PYTHON_UPSTREAM), mode=mode) as direct:
        expected = {
            "tools": wire(await direct.list_tools()),
            "prompts": wire(await direct.list_prompts()),
            "prompt": wire(await direct.get_prompt("greet")),
            "echo": wire(await direct.call_tool("echo", {"text": "hello"})),
            "small": wire(await direct.read_resource("test://small.txt")),
            "resources": wire(await direct.list_resources()),
        }
        direct_version = direct.protocol_version
    async with Client(proxy_params(data_dir, PYTHON_UPSTREAM), mode=mode) as proxied:
        assert proxied.protocol_version == direct_version
        assert proxied.server_capabilities.resources is not None
        tools = wire(await proxied.list_tools())
        assert [t["name"] for t in tools["tools"]][-1] == "read_artifact"
        tools["tools"] = tools["tools"][:-1]
        assert without_era_stamps(tools) == without_era_stamps(expected["tools"])
        assert without_era_stamps(wire(await proxied.list_prompts())) == without_era_stamps(
            expected["prompts"]
        )
        assert without_era_stamps(wire(await proxied.get_prompt("greet"))) == without_era_stamps(
            expected["prompt"]
        )
        assert wire(await proxied.call_tool("echo", {"text": "hello"})) == expected["echo"]
        assert without_era_stamps(
            wire(await proxied.read_resource("test://small.txt"))
        ) == without_era_stamps(expected["small"])
        resources = wire(await proxied.list_resources())
        # The upstream's first; the store is empty here.
        assert [r["uri"] for r in resources["resources"]] == [
            r["uri"] for r in expected["resources"]["resources"]
        ]
        templates = wire(await proxied.list_resource_templates())
        assert [t["uriTemplate"] for t in templates["resourceTemplates"]] == [
            STORE_TEMPLATE,
            *(template.uri_template for template in view_templates()),
        ]


@pytest.mark.parametrize("mode", MODES)
async def test_an_oversized_photo_comes_back_small_with_a_link_whose_windows_equal_the_original(
    data_dir: Path, mode: str
) -> None:
    original = photo_png(3000, 2000)
    async with Client(proxy_params(data_dir, PYTHON_UPSTREAM), mode=mode) as client:
        result = await client.call_tool("photo", {"width": 3000, "height": 2000})
        assert len(json.dumps(wire(result))) < 512 * 1024
        images = [b for b in result.content if isinstance(b, ImageContent)]
        assert len(images) == 1
        shown = Image.open(io.BytesIO(base64.b64decode(images[0].data)))
        assert max(shown.size) <= 1024
        links = [b for b in result.content if isinstance(b, ResourceLink)]
        assert len(links) == 1
        assert links[0].size == len(original)
        assert await read_whole(client, str(links[0].uri)) == original
        # The store's listing now has it, after the upstream's resources.
        listed = [str(r.uri) for r in (await client.list_resources()).resources]
        assert listed[:2] == ["test://small.txt", "test://big.bin"]
        assert str(links[0].uri) in listed[2:]


@pytest.mark.parametrize("mode", MODES)
async def test_the_read_tool_returns_the_offloaded_bytes(data_dir: Path, mode: str) -> None:
    async with Client(proxy_params(data_dir, PYTHON_UPSTREAM), mode=mode) as client:
        result = await client.call_tool("big_text", {"size": 2_000_000})
        links = [b for b in result.content if isinstance(b, ResourceLink)]
        assert len(links) == 1
        text = " ".join(b.text for b in result.content if isinstance(b, TextContent))
        assert "read_artifact" in text
        window = await client.call_tool(
            "read_artifact", {"uri": str(links[0].uri), "offset": 0, "length": 1000}
        )
        assert not window.is_error
        assert window.structured_content is not None
        assert window.structured_content["window"]["length"] == 1000
        embedded = window.content[1]
        assert isinstance(embedded, EmbeddedResource)
        assert isinstance(embedded.resource, BlobResourceContents)
        assert base64.b64decode(embedded.resource.blob) == text_of(2_000_000).encode()[:1000]


@pytest.mark.parametrize("mode", MODES)
async def test_progress_notifications_reach_the_client(data_dir: Path, mode: str) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with Client(proxy_params(data_dir, PYTHON_UPSTREAM), mode=mode) as client:
        result = await client.call_tool("progress", {"steps": 3}, progress_callback=on_progress)
    assert result.content == [TextContent(text="done after 3 steps")]
    assert seen == [(1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")]


async def test_a_sampling_request_reaches_the_client_and_its_answer_goes_back(data_dir: Path) -> None:
    asked: list[str] = []

    async def sampling(context: Any, params: CreateMessageRequestParams) -> CreateMessageResult:
        first = params.messages[0].content
        asked.append(first.text if isinstance(first, TextContent) else "")
        return CreateMessageResult(
            role="assistant", content=TextContent(text="forty-two"), model="test-model"
        )

    async with Client(
        proxy_params(data_dir, PYTHON_UPSTREAM), mode="legacy", sampling_callback=sampling
    ) as client:
        result = await client.call_tool("sample", {"prompt": "what is six times seven?"})
    assert asked == ["what is six times seven?"]
    assert result.content == [TextContent(text="model said: forty-two")]


@pytest.mark.parametrize("mode", MODES)
async def test_a_dead_upstream_fails_the_pending_call_instead_of_hanging(data_dir: Path, mode: str) -> None:
    async with Client(proxy_params(data_dir, PYTHON_UPSTREAM), mode=mode) as client:
        await client.call_tool("echo", {"text": "alive"})
        with pytest.raises(MCPError) as failure:
            await client.call_tool("die", {})
        assert "upstream" in failure.value.error.message
        assert isinstance(failure.value.error.data, dict)
        assert failure.value.error.data["reason"] == "upstream_unavailable"


async def test_a_cancellation_from_the_host_reaches_the_upstream(data_dir: Path, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    async with raw_peer(proxy_command(data_dir, PYTHON_UPSTREAM)) as peer:
        await peer.handshake()
        await peer.send(
            {
                "jsonrpc": "2.0",
                "id": 41,
                "method": "tools/call",
                "params": {"name": "block", "arguments": {"marker": str(marker)}},
            }
        )
        await wait_until_async(lambda: marker.exists() and marker.read_text() == "started", within=TIMEOUT)
        await peer.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 41}})
        await wait_until_async(lambda: marker.read_text() == "cancelled", within=TIMEOUT)
        # The proxy and the upstream still serve.
        assert json.loads(await peer.request(42, "ping", {}))["result"] == {}


async def test_a_large_upstream_resource_is_answered_with_its_store_copy(data_dir: Path) -> None:
    async with Client(proxy_params(data_dir, PYTHON_UPSTREAM), mode="legacy") as client:
        with pytest.raises(MCPError) as failure:
            await client.read_resource("test://big.bin")
        data = failure.value.error.data
        assert isinstance(data, dict)
        assert data["reason"] == "range_required"
        assert data["upstreamUri"] == "test://big.bin"
        assert await read_whole(client, data["uri"]) == pdf_like(3_000_000)


async def test_store_resources_page_after_the_upstreams_with_composite_cursors(data_dir: Path) -> None:
    settings = Settings(data_dir=data_dir)
    async with open_service(settings) as service:
        for i in range(105):
            await service.create_artifact(
                Caller(namespace=NAMESPACE),
                one(f"artifact {i}".encode()),
                name=f"a{i}.txt",
                mime_type="text/plain",
            )
    async with Client(proxy_params(data_dir, PYTHON_UPSTREAM), mode="legacy") as client:
        first = await client.list_resources()
        assert [str(r.uri) for r in first.resources[:2]] == ["test://small.txt", "test://big.bin"]
        assert len(first.resources) == 102
        assert first.next_cursor is not None
        assert first.next_cursor.startswith("s:")
        second = await client.list_resources(cursor=first.next_cursor)
        assert second.next_cursor is None
        uris = [str(r.uri) for r in [*first.resources[2:], *second.resources]]
        assert len(uris) == len(set(uris)) == 105
        assert all(uri.startswith("blobstore://artifacts/") for uri in uris)
        with pytest.raises(MCPError):
            await client.list_resources(cursor="garbage")


async def one(data: bytes) -> AsyncIterator[bytes]:
    yield data

"""Tool-result helpers and the example tool server, read back through the official client."""

from __future__ import annotations

import base64
import io
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp import Client
from mcp.server import MCPServer
from mcp.types import AudioContent, ImageContent, ResourceLink, TextContent
from PIL import Image

from blobstore.models import Caller
from blobstore.service import ArtifactService
from blobstore.tokens import estimate_image_tokens
from mcp_resources.results.content import resource_link_for, tool_result_for
from mcp_resources.results.renditions import RenditionCache
from tests.mcp.conftest import put

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from image_tool_server import build_server, draw_heatmap

CALLER = Caller(namespace="tools")


def png(width: int, height: int, cell: int) -> bytes:
    return draw_heatmap(width, height, cell, seed=7)


def wav(seconds: float, rate: int = 8000) -> bytes:
    import wave

    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(rate)
        writer.writeframes(b"\x00\x01" * int(seconds * rate))
    return out.getvalue()


def test_image_token_estimate_reproduces_the_seed_table() -> None:
    assert 250 <= estimate_image_tokens(512, 512) <= 400
    assert 700 <= estimate_image_tokens(1024, 768) <= 1100
    assert 1300 <= estimate_image_tokens(1920, 1080) <= 1600
    # Hosts downscale a 4K screenshot first, so it costs no more than the budgeted size.
    assert estimate_image_tokens(3840, 2160) == estimate_image_tokens(1920, 1080)
    assert estimate_image_tokens(28, 28) == 1


async def test_resource_link_carries_every_field(service: ArtifactService) -> None:
    artifact = await service.create_artifact(
        CALLER, _one(png(64, 32, 8)), name="chart.png", metadata={"title": "Q3 chart"}
    )
    link = resource_link_for(artifact, audience=["user"], priority=0.5)
    wire = link.model_dump(by_alias=True, exclude_none=True)
    assert wire["type"] == "resource_link"
    assert (wire["uri"], wire["name"], wire["title"], wire["mimeType"], wire["size"]) == (
        artifact.uri,
        "chart.png",
        "Q3 chart",
        "image/png",
        artifact.size,
    )
    assert "64x32" in wire["description"]
    assert wire["annotations"] == {
        "audience": ["user"],
        "priority": 0.5,
        "lastModified": wire["annotations"]["lastModified"],
    }
    assert wire["annotations"]["lastModified"].endswith("Z")


async def _one(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def test_small_image_is_inlined_after_the_summary(service: ArtifactService) -> None:
    data = png(200, 100, 10)
    artifact = await put(service, data, "small.png", "image/png", caller=CALLER)
    result = await tool_result_for(artifact, summary="A small heatmap.", service=service, caller=CALLER)
    text, image = result.content
    assert isinstance(text, TextContent)
    assert text.text.startswith("A small heatmap.")
    assert isinstance(image, ImageContent)
    assert base64.b64decode(image.data) == data


async def test_large_image_is_downscaled_to_the_long_edge_once(service: ArtifactService) -> None:
    artifact = await put(service, png(3000, 1500, 300), "wide.png", "image/png", caller=CALLER)
    cache = RenditionCache()
    first = await tool_result_for(artifact, summary="wide", service=service, caller=CALLER, renditions=cache)
    second = await tool_result_for(artifact, summary="wide", service=service, caller=CALLER, renditions=cache)
    image = first.content[1]
    assert isinstance(image, ImageContent)
    with Image.open(io.BytesIO(base64.b64decode(image.data))) as decoded:
        assert decoded.size == (1024, 512)
    assert cache.computed == 1
    assert second.content[1] == image
    assert "1024x512" in first.content[0].text  # type: ignore[union-attr]


async def test_custom_budget_and_limit_are_honoured(service: ArtifactService) -> None:
    artifact = await put(service, png(800, 400, 50), "budget.png", "image/png", caller=CALLER)
    small = await tool_result_for(
        artifact, service=service, caller=CALLER, long_edge=256, renditions=RenditionCache()
    )
    with Image.open(io.BytesIO(base64.b64decode(small.content[1].data))) as decoded:  # type: ignore[union-attr]
        assert max(decoded.size) == 256
    linked = await tool_result_for(artifact, service=service, caller=CALLER, inline_limit=100)
    assert isinstance(linked.content[1], ResourceLink)


async def test_audio_is_inlined_under_the_limit_and_linked_above(service: ArtifactService) -> None:
    short = await put(service, wav(1), "short.wav", "audio/wav", caller=CALLER)
    long = await put(service, wav(40), "long.wav", "audio/wav", caller=CALLER)
    inline = await tool_result_for(short, summary="one second", service=service, caller=CALLER)
    linked = await tool_result_for(long, summary="forty seconds", service=service, caller=CALLER)
    assert isinstance(inline.content[1], AudioContent)
    assert inline.content[1].mime_type == "audio/wav"
    assert isinstance(linked.content[1], ResourceLink)
    assert linked.content[1].size == long.size


async def test_non_media_is_always_a_link(service: ArtifactService) -> None:
    artifact = await put(service, b"%PDF-1.4\n" + b"x" * 100, "r.pdf", "application/pdf", caller=CALLER)
    result = await tool_result_for(artifact, summary="Report: 3 findings.", service=service, caller=CALLER)
    assert isinstance(result.content[0], TextContent)
    assert isinstance(result.content[1], ResourceLink)
    assert artifact.uri in result.content[0].text


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_example_tool_server_results_read_back_through_the_client(
    service: ArtifactService, mode: str
) -> None:
    server: MCPServer = build_server(service)
    async with Client(server, mode=mode) as client:
        small = await client.call_tool("render_heatmap", {"width": 160, "height": 90, "cell": 10})
        wide = await client.call_tool("render_heatmap", {"width": 2400, "height": 1200, "cell": 200})
        noisy = await client.call_tool(
            "render_heatmap", {"width": 1600, "height": 1600, "cell": 1, "seed": 3}
        )

        assert [block.type for block in small.content] == ["text", "image"]
        with Image.open(io.BytesIO(base64.b64decode(small.content[1].data))) as decoded:  # type: ignore[union-attr]
            assert decoded.size == (160, 90)

        assert [block.type for block in wide.content] == ["text", "image"]
        with Image.open(io.BytesIO(base64.b64decode(wide.content[1].data))) as decoded:  # type: ignore[union-attr]
            assert decoded.size == (1024, 512)

        assert [block.type for block in noisy.content] == ["text", "resource_link"]
        link = noisy.content[1]
        assert isinstance(link, ResourceLink)
        assert link.size is not None
        assert link.size > 512 * 1024
        first = await client.read_resource(f"{link.uri}?offset=0&length=8")
        assert base64.b64decode(first.contents[0].blob) == b"\x89PNG\r\n\x1a\n"  # type: ignore[union-attr]
        listed = [r.uri for r in (await client.list_resources()).resources]
        assert link.uri in listed

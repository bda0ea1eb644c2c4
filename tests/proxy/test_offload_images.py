"""Image blocks in proxied tool results: stored originals, downscaled copies, links, metadata and audit."""

from __future__ import annotations

import base64
import hashlib
import io
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from mcp_resources.proxy.offload import canonical_digest, measure
from mcp_resources.uris import ARTIFACT_META_KEY
from tests.proxy.offload_fixtures import (
    CALLER,
    READ_TOOL,
    UPSTREAM,
    Rig,
    b64,
    flat_png,
    image_block,
    links,
    open_rig,
    photo_png,
    text_of,
)

ARGS = {"path": "/photos/big.png"}


@pytest.fixture(scope="module")
def photo() -> bytes:
    return photo_png(3000, 2000)


def pixels(block: dict[str, Any]) -> tuple[int, int]:
    with Image.open(io.BytesIO(base64.b64decode(block["data"]))) as image:
        return image.size


async def test_large_photo_becomes_a_downscaled_image_and_a_link_to_the_original(
    rig: Rig, photo: bytes
) -> None:
    offloader = rig.offloader()
    result = {"content": [image_block(photo)]}
    out = await offloader.tool_result(
        tool="read_media_file", arguments=ARGS, output_schema=None, result=result
    )
    assert out is not None
    images = [b for b in out["content"] if b["type"] == "image"]
    assert len(images) == 1
    width, height = pixels(images[0])
    assert max(width, height) <= 1024
    assert len(base64.b64decode(images[0]["data"])) <= rig.settings.inline_limit
    # A noisy photo as a 1024 px PNG is over 512 KiB; the fallback JPEG fits.
    assert images[0]["mimeType"] == "image/jpeg"
    (link,) = links(out)
    assert await rig.bytes_of(link["uri"]) == photo
    assert link["size"] == len(photo)
    assert link["mimeType"] == "image/png"
    assert "3000x2000 px" in link["description"]
    assert "image/png" in link["description"]
    assert link["_meta"][ARTIFACT_META_KEY]["sha256"] == hashlib.sha256(photo).hexdigest()
    size, tokens = measure(out)
    assert size <= 1_048_576
    assert tokens <= 25_000


async def test_offloaded_artifact_records_upstream_tool_and_argument_digest(rig: Rig, photo: bytes) -> None:
    offloader = rig.offloader()
    out = await offloader.tool_result(
        tool="read_media_file", arguments=ARGS, output_schema=None, result={"content": [image_block(photo)]}
    )
    assert out is not None
    (link,) = links(out)
    artifact = await rig.service.get_artifact(CALLER, link["uri"].rsplit("/", 1)[-1])
    canonical = json.dumps(ARGS, sort_keys=True, separators=(",", ":")).encode()
    assert artifact.metadata == {
        "source": "proxy",
        "upstream": UPSTREAM,
        "tool": "read_media_file",
        "arguments_sha256": hashlib.sha256(canonical).hexdigest(),
    }
    assert canonical_digest({"b": 1, "a": "é"}) == hashlib.sha256('{"a":"é","b":1}'.encode()).hexdigest()


async def test_each_offload_writes_an_audit_line_without_content(rig: Rig, photo: bytes) -> None:
    offloader = rig.offloader()
    out = await offloader.tool_result(
        tool="read_media_file", arguments=ARGS, output_schema=None, result={"content": [image_block(photo)]}
    )
    assert out is not None
    lines = [line for line in rig.audit_lines() if line["action"] == "offload"]
    assert len(lines) == 1
    (line,) = lines
    assert line["tool"] == "read_media_file"
    assert line["upstream"] == UPSTREAM
    assert line["arguments_sha256"] == canonical_digest(ARGS)
    assert line["sha256"] == hashlib.sha256(photo).hexdigest()
    assert line["size"] == len(photo)
    assert line["mime_type"] == "image/png"
    assert isinstance(line["duration_ms"], int)
    raw = rig.audit_path.read_text()
    assert b64(photo)[:64] not in raw
    assert "/photos/big.png" not in raw


async def test_text_line_tells_how_to_read_with_the_read_tool(rig: Rig, photo: bytes) -> None:
    out = await rig.offloader().tool_result(
        tool="t", arguments=None, output_schema=None, result={"content": [image_block(photo)]}
    )
    assert out is not None
    (link,) = links(out)
    text = text_of(out)
    assert f"read it with the {READ_TOOL} tool (uri={link['uri']}" in text
    assert f"{link['uri']}?offset=0&length=" in text


async def test_without_read_tool_the_line_mentions_resources_read_only(rig: Rig, photo: bytes) -> None:
    for offloader in (rig.offloader(read_tool_name=None), rig.offloader(read_tool_hint=False)):
        out = await offloader.tool_result(
            tool="t", arguments=None, output_schema=None, result={"content": [image_block(photo)]}
        )
        assert out is not None
        text = text_of(out)
        assert "resources/read" in text
        assert READ_TOOL not in text
        assert " tool (" not in text


async def test_small_image_within_the_budgets_is_left_exactly_as_sent(rig: Rig) -> None:
    result = {"content": [{"type": "text", "text": "hi"}, image_block(flat_png(300, 200))]}
    snapshot = json.dumps(result)
    out = await rig.offloader().tool_result(tool="t", arguments={}, output_schema=None, result=result)
    assert out is None
    assert json.dumps(result) == snapshot
    assert rig.audit_lines() == []


async def test_image_whose_downscale_is_over_the_inline_limit_is_only_linked(tmp_path: Path) -> None:
    photo = photo_png(1600, 1200, seed=3)
    async with open_rig(tmp_path, inline_limit=8 * 1024) as rig:
        out = await rig.offloader().tool_result(
            tool="t", arguments=None, output_schema=None, result={"content": [image_block(photo)]}
        )
    assert out is not None
    assert [b["type"] for b in out["content"]] == ["text", "resource_link"]
    assert "not shown inline (even downscaled to 1024 px it is over the 8.0 KiB inline limit)" in text_of(out)
    assert "1600x1200 px" in out["content"][1]["description"]


async def test_same_bytes_give_the_same_artifact_and_extend_its_ttl(rig: Rig) -> None:
    image = flat_png(2000, 1000)
    offloader = rig.offloader()
    result = {"content": [image_block(image)]}
    first = await offloader.tool_result(tool="t", arguments={"x": 1}, output_schema=None, result=result)
    assert first is not None
    (link1,) = links(first)
    id1 = link1["uri"].rsplit("/", 1)[-1]
    before = await rig.service.get_artifact(CALLER, id1)
    start = rig.service.clock()
    rig.service.clock.source = lambda: start + timedelta(days=3)
    second = await offloader.tool_result(tool="t", arguments={"x": 1}, output_schema=None, result=result)
    assert second is not None
    (link2,) = links(second)
    assert link2["uri"] == link1["uri"]
    after = await rig.service.get_artifact(CALLER, id1)
    assert before.expires_at is not None
    assert after.expires_at is not None
    assert after.expires_at - before.expires_at >= timedelta(days=3) - timedelta(seconds=5)
    # Other arguments: a new artifact (its own provenance) over the same blob.
    third = await offloader.tool_result(tool="t", arguments={"x": 2}, output_schema=None, result=result)
    assert third is not None
    (link3,) = links(third)
    assert link3["uri"] != link1["uri"]
    other = await rig.service.get_artifact(CALLER, link3["uri"].rsplit("/", 1)[-1])
    assert other.blob_id == after.blob_id


async def test_many_images_are_held_to_the_smaller_edge_limit(tmp_path: Path) -> None:
    config = tmp_path / "offload.toml"
    config.write_text("image_long_edge = 4000\n")
    async with open_rig(tmp_path) as rig:
        offloader = rig.offloader(config=config, profile="claude-desktop")
        strips = [image_block(flat_png(2500, 40, (i * 10, 0, 0))) for i in range(21)]
        out = await offloader.tool_result(
            tool="t", arguments=None, output_schema=None, result={"content": strips}
        )
        assert out is not None
        images = [b for b in out["content"] if b["type"] == "image"]
        assert len(images) == 21
        assert all(pixels(b)[0] == 2000 for b in images)
        # Twenty images of the same strip are within the 8000 px limit and the 4000 px budget: untouched.
        few = {"content": strips[:20]}
        assert await offloader.tool_result(tool="t", arguments=None, output_schema=None, result=few) is None


async def test_never_offload_tool_is_forwarded_unchanged(tmp_path: Path, photo: bytes) -> None:
    config = tmp_path / "offload.toml"
    config.write_text('never_offload = ["read_media_file"]\n')
    async with open_rig(tmp_path) as rig:
        offloader = rig.offloader(config=config)
        result = {"content": [image_block(photo)]}
        assert (
            await offloader.tool_result(
                tool="read_media_file", arguments={}, output_schema=None, result=result
            )
            is None
        )
        assert await offloader.tool_result(tool="other", arguments={}, output_schema=None, result=result)


async def test_always_offload_tool_stores_even_a_small_image(tmp_path: Path) -> None:
    config = tmp_path / "offload.toml"
    config.write_text('always_offload = ["screenshot"]\n')
    small = flat_png(200, 100)
    async with open_rig(tmp_path) as rig:
        out = await rig.offloader(config=config).tool_result(
            tool="screenshot", arguments={}, output_schema=None, result={"content": [image_block(small)]}
        )
        assert out is not None
        (link,) = links(out)
        assert await rig.bytes_of(link["uri"]) == small
        assert any(b["type"] == "image" for b in out["content"])


async def test_undecodable_image_is_stored_and_linked(rig: Rig) -> None:
    junk = b"\x89PNG\r\n\x1a\n" + b"not really a png" * 100
    out = await rig.offloader().tool_result(
        tool="t", arguments={}, output_schema=None, result={"content": [image_block(junk)]}
    )
    assert out is not None
    assert [b["type"] for b in out["content"]] == ["text", "resource_link"]
    # Its first chunk claims 1.8 GB: the file ends long before.
    assert "not shown inline (it could not be decoded: its image data is truncated)" in text_of(out)
    assert await rig.bytes_of(links(out)[0]["uri"]) == junk


async def test_an_image_within_the_edge_but_over_the_inline_limit_is_linked_saying_so(tmp_path: Path) -> None:
    photo = photo_png(600, 400, seed=5)
    async with open_rig(tmp_path, inline_limit=64 * 1024) as rig:
        out = await rig.offloader().tool_result(
            tool="t", arguments=None, output_schema=None, result={"content": [image_block(photo)]}
        )
    assert out is not None
    assert [b["type"] for b in out["content"]] == ["text", "resource_link"]
    assert "not shown inline (it is over the 64.0 KiB inline limit)" in text_of(out)

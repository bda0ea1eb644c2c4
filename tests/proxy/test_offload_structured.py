"""structuredContent after offloading: duplicated payloads shrink, the outputSchema still validates."""

from __future__ import annotations

import base64
import copy
import io
import logging
from typing import Any

import pytest
from jsonschema import validate
from PIL import Image

from mcp_resources.proxy.offload import measure
from tests.proxy.offload_fixtures import (
    Rig,
    b64,
    fake_pdf,
    flat_png,
    image_block,
    links,
    photo_png,
    wav_bytes,
)

# The reference filesystem server's read_media_file outputSchema (its zod schema as JSON Schema).
MEDIA_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "content": {
            "type": "array",
            "items": {
                "anyOf": [
                    {
                        "type": "object",
                        "properties": {
                            "type": {"type": "string", "enum": ["image", "audio"]},
                            "data": {"type": "string"},
                            "mimeType": {"type": "string"},
                        },
                        "required": ["type", "data", "mimeType"],
                        "additionalProperties": False,
                    },
                    {
                        "type": "object",
                        "properties": {
                            "type": {"type": "string", "const": "resource"},
                            "resource": {
                                "type": "object",
                                "properties": {
                                    "uri": {"type": "string"},
                                    "mimeType": {"type": "string"},
                                    "blob": {"type": "string"},
                                },
                                "required": ["uri", "blob"],
                                "additionalProperties": False,
                            },
                        },
                        "required": ["type", "resource"],
                        "additionalProperties": False,
                    },
                ]
            },
        }
    },
    "required": ["content"],
    "additionalProperties": False,
    "$schema": "http://json-schema.org/draft-07/schema#",
}


def media_result(item: dict[str, Any]) -> dict[str, Any]:
    """What read_media_file returns: the block in content and mirrored in structuredContent."""
    return {"content": [item], "structuredContent": {"content": [copy.deepcopy(item)]}}


async def test_mirrored_image_becomes_the_store_uri_and_the_image_keeps_the_budget(rig: Rig) -> None:
    photo = photo_png(3000, 2000)
    result = media_result(image_block(photo))
    out = await rig.offloader().tool_result(
        tool="read_media_file", arguments={"path": "/p.png"}, output_schema=MEDIA_SCHEMA, result=result
    )
    assert out is not None
    validate(out["structuredContent"], MEDIA_SCHEMA)
    (shown,) = [b for b in out["content"] if b["type"] == "image"]
    (link,) = links(out)
    # Stored once, referenced: the mirror names the original instead of repeating the shown copy's bytes.
    assert out["structuredContent"] == {
        "content": [{"type": "image", "data": link["uri"], "mimeType": "image/png"}]
    }
    with Image.open(io.BytesIO(base64.b64decode(shown["data"]))) as image:
        assert max(image.size) == 1024
    size, tokens = measure(out)
    assert size <= 1_048_576
    assert tokens <= 25_000


async def test_where_no_reference_is_valid_the_mirror_carries_the_downscaled_copy(rig: Rig) -> None:
    schema = copy.deepcopy(MEDIA_SCHEMA)
    media = schema["properties"]["content"]["items"]["anyOf"][0]
    media["properties"]["data"]["pattern"] = "^[A-Za-z0-9+/]*={0,2}$"
    photo = flat_png(3000, 2000)
    out = await rig.offloader().tool_result(
        tool="read_media_file", arguments={}, output_schema=schema, result=media_result(image_block(photo))
    )
    assert out is not None
    validate(out["structuredContent"], schema)
    (shown,) = [b for b in out["content"] if b["type"] == "image"]
    (mirrored,) = out["structuredContent"]["content"]
    assert mirrored == {"type": "image", "data": shown["data"], "mimeType": shown["mimeType"]}


async def test_mirrored_audio_string_becomes_the_store_uri_where_the_schema_allows(rig: Rig) -> None:
    audio = wav_bytes(30)
    result = media_result({"type": "audio", "data": b64(audio), "mimeType": "audio/wav"})
    out = await rig.offloader().tool_result(
        tool="read_media_file", arguments={}, output_schema=MEDIA_SCHEMA, result=result
    )
    assert out is not None
    validate(out["structuredContent"], MEDIA_SCHEMA)
    (link,) = links(out)
    assert out["structuredContent"] == {
        "content": [{"type": "audio", "data": link["uri"], "mimeType": "audio/wav"}]
    }


async def test_mirrored_embedded_blob_is_replaced_inside_its_resource(rig: Rig) -> None:
    pdf = fake_pdf(900_000)
    item = {
        "type": "resource",
        "resource": {"uri": "file:///r.pdf", "mimeType": "application/pdf", "blob": b64(pdf)},
    }
    out = await rig.offloader().tool_result(
        tool="read_media_file", arguments={}, output_schema=MEDIA_SCHEMA, result=media_result(item)
    )
    assert out is not None
    validate(out["structuredContent"], MEDIA_SCHEMA)
    (link,) = links(out)
    assert out["structuredContent"]["content"][0]["resource"]["blob"] == link["uri"]
    assert await rig.bytes_of(link["uri"]) == pdf


async def test_without_schema_an_image_shaped_object_becomes_the_link(rig: Rig) -> None:
    photo = flat_png(3000, 2000)
    result = {
        "content": [image_block(photo)],
        "structuredContent": {"shot": image_block(photo), "page": "home"},
    }
    out = await rig.offloader().tool_result(
        tool="screenshot", arguments={}, output_schema=None, result=result
    )
    assert out is not None
    (link,) = links(out)
    assert out["structuredContent"] == {"shot": link, "page": "home"}


async def test_a_mirrored_text_becomes_the_store_uri(rig: Rig) -> None:
    text = "a row of a long report\n" * 20_000
    schema = {
        "type": "object",
        "properties": {"result": {"type": "string", "title": "Result"}},
        "required": ["result"],
    }
    result = {"content": [{"type": "text", "text": text}], "structuredContent": {"result": text}}
    out = await rig.offloader(profile="claude-code").tool_result(
        tool="report", arguments={}, output_schema=schema, result=result
    )
    assert out is not None
    (link,) = links(out)
    assert out["structuredContent"] == {"result": link["uri"]}
    assert await rig.bytes_of(link["uri"]) == text.encode()
    assert out["content"][0]["text"].startswith("a row of a long report\n")


async def test_link_object_replaces_the_payload_object_when_the_schema_accepts_it(rig: Rig) -> None:
    audio = wav_bytes(30)
    schema = {
        "type": "object",
        "properties": {
            "clip": {"type": "object", "required": ["uri"], "properties": {"uri": {"type": "string"}}}
        },
    }
    result = {
        "content": [{"type": "audio", "data": b64(audio), "mimeType": "audio/wav"}],
        "structuredContent": {"clip": {"uri": "mic://1", "data": b64(audio)}},
    }
    out = await rig.offloader().tool_result(tool="record", arguments={}, output_schema=schema, result=result)
    assert out is not None
    (link,) = links(out)
    assert out["structuredContent"]["clip"] == link
    validate(out["structuredContent"], schema)


async def test_structured_data_that_duplicates_nothing_is_never_touched(rig: Rig) -> None:
    big_string = (
        "k" * 300_000
    )  # large (within the claude-desktop caps), but not a payload of an offloaded block
    photo = flat_png(3000, 2000)
    structured = {"rows": [1, 2, 3], "note": big_string, "other_image": b64(flat_png(10, 10))}
    result = {"content": [image_block(photo)], "structuredContent": structured}
    out = await rig.offloader(profile="claude-desktop").tool_result(
        tool="t", arguments={}, output_schema=None, result=result
    )
    assert out is not None
    assert out["structuredContent"] is structured
    assert out["structuredContent"] == {
        "rows": [1, 2, 3],
        "note": big_string,
        "other_image": b64(flat_png(10, 10)),
    }


async def test_payload_no_smaller_form_can_replace_is_kept_logged_and_the_result_stored_whole(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    audio = wav_bytes(30)
    schema = {
        "type": "object",
        "properties": {"pcm": {"type": "string", "pattern": "^[A-Za-z0-9+/]*={0,2}$"}},
        "required": ["pcm"],
    }
    result = {
        "content": [{"type": "audio", "data": b64(audio), "mimeType": "audio/wav"}],
        "structuredContent": {"pcm": b64(audio)},
    }
    with caplog.at_level(logging.WARNING, logger="mcp_resources.proxy"):
        out = await rig.offloader(profile="claude-code").tool_result(
            tool="record", arguments={}, output_schema=schema, result=result
        )
    assert out is not None
    assert "structuredContent/pcm duplicates an offloaded block" in caplog.text
    assert "stored whole" in caplog.text
    assert b64(audio)[:40] not in caplog.text
    # 1.25 MB of base64 stays in structuredContent: over every cap, so the whole result is stored as JSON.
    assert out["isError"] is True
    assert "structuredContent" not in out
    (link,) = links(out)
    assert link["mimeType"] == "application/json"
    assert "too large for this host" in out["content"][0]["text"]
    size, tokens = measure(out)
    assert size <= 1_048_576
    assert tokens <= 25_000


async def test_document_that_already_fails_its_schema_is_left_alone(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    photo = flat_png(3000, 2000)
    result = {
        "content": [image_block(photo)],
        "structuredContent": {"content": [image_block(photo)], "extra": 1},
    }
    with caplog.at_level(logging.WARNING, logger="mcp_resources.proxy"):
        out = await rig.offloader().tool_result(
            tool="read_media_file", arguments={}, output_schema=MEDIA_SCHEMA, result=result
        )
    assert out is not None
    assert out["structuredContent"] is result["structuredContent"]
    assert "does not validate against its outputSchema" in caplog.text

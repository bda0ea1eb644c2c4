"""Audio, embedded blobs and long text in proxied tool results."""

from __future__ import annotations

import json
from pathlib import Path

from tests.proxy.offload_fixtures import Rig, b64, fake_pdf, links, open_rig, text_of, wav_bytes


async def test_long_audio_becomes_a_line_with_type_size_duration_and_a_link(rig: Rig) -> None:
    audio = wav_bytes(30)
    result = {"content": [{"type": "audio", "data": b64(audio), "mimeType": "audio/wav"}]}
    out = await rig.offloader().tool_result(tool="record", arguments={}, output_schema=None, result=result)
    assert out is not None
    assert [b["type"] for b in out["content"]] == ["text", "resource_link"]
    line = text_of(out)
    assert line.startswith("[audio: ")
    assert "audio/wav" in line
    assert "937.5 KiB" in line
    assert "30.0 s" in line
    (link,) = links(out)
    assert await rig.bytes_of(link["uri"]) == audio
    assert "30.0 s" in link["description"]
    (audit,) = [a for a in rig.audit_lines() if a["action"] == "offload"]
    assert audit["media_duration_seconds"] == 30.0
    assert audit["mime_type"] == "audio/wav"


async def test_short_audio_within_the_limits_is_left_as_sent(rig: Rig) -> None:
    audio = wav_bytes(0.5)
    result = {"content": [{"type": "audio", "data": b64(audio), "mimeType": "audio/wav"}]}
    assert (
        await rig.offloader().tool_result(tool="t", arguments={}, output_schema=None, result=result) is None
    )


async def test_embedded_blob_over_the_inline_limit_is_stored_under_its_name(rig: Rig) -> None:
    pdf = fake_pdf(1_000_000)
    result = {
        "content": [
            {"type": "text", "text": "Here is the report."},
            {
                "type": "resource",
                "resource": {
                    "uri": "tableau://exports/report.pdf",
                    "mimeType": "application/pdf",
                    "blob": b64(pdf),
                },
            },
        ]
    }
    out = await rig.offloader().tool_result(tool="export", arguments={}, output_schema=None, result=result)
    assert out is not None
    assert out["content"][0] == {"type": "text", "text": "Here is the report."}
    assert [b["type"] for b in out["content"][1:]] == ["text", "resource_link"]
    assert "embedded resource tableau://exports/report.pdf" in out["content"][1]["text"]
    assert "application/pdf" in out["content"][1]["text"]
    (link,) = links(out)
    assert link["name"] == "report.pdf"
    assert await rig.bytes_of(link["uri"]) == pdf


async def test_small_embedded_blob_is_left_as_sent(rig: Rig) -> None:
    result = {
        "content": [
            {
                "type": "resource",
                "resource": {"uri": "x://a", "mimeType": "application/pdf", "blob": b64(fake_pdf(5000))},
            }
        ]
    }
    assert (
        await rig.offloader().tool_result(tool="t", arguments={}, output_schema=None, result=result) is None
    )


async def test_long_text_becomes_a_head_preview_a_cut_line_and_a_link(rig: Rig) -> None:
    body = "".join(f"line {i:06d}: " + "x" * 80 + "\n" for i in range(3000))
    result = {"content": [{"type": "text", "text": body}]}
    out = await rig.offloader().tool_result(tool="grep", arguments={}, output_schema=None, result=result)
    assert out is not None
    assert [b["type"] for b in out["content"]] == ["text", "resource_link"]
    shown = out["content"][0]["text"]
    preview, _, line = shown.rpartition("[text cut: ")
    assert body.startswith(preview)
    assert preview.endswith("\n")
    assert len(preview.encode()) <= 4096
    total = len(body.encode())
    assert f"showing the first {len(preview.encode())} of {total} bytes" in line
    assert f"{total - len(preview.encode())} bytes not shown" in line
    assert "of 3001 lines" in line
    (link,) = links(out)
    assert link["mimeType"] == "text/plain"
    # The line carries what a client that keeps only the link's URI drops: name, type, size, how to read it.
    size = f"{total / 1024:.1f} KiB"
    assert f"the whole text, {link['name']} (text/plain, {size}), is stored as {link['uri']}; " in line
    assert f"read it with the read_artifact tool (uri={link['uri']}, offset, length;" in line
    assert (await rig.bytes_of(link["uri"])).decode() == body


async def test_preview_is_cut_at_a_utf8_character_boundary(rig: Rig) -> None:
    body = "é€😀" * 40_000  # multi-byte characters, no line ends
    result = {"content": [{"type": "text", "text": body}]}
    out = await rig.offloader().tool_result(tool="t", arguments={}, output_schema=None, result=result)
    assert out is not None
    preview = out["content"][0]["text"].split("\n[text cut: ")[0]
    assert body.startswith(preview)
    assert 4096 - 4 < len(preview.encode()) <= 4096


async def test_text_under_the_threshold_is_left_as_sent(rig: Rig) -> None:
    result = {"content": [{"type": "text", "text": "y" * 40_000}]}
    assert (
        await rig.offloader().tool_result(tool="t", arguments={}, output_schema=None, result=result) is None
    )


async def test_embedded_text_resource_over_the_threshold_is_stored_with_its_type(rig: Rig) -> None:
    doc = json.dumps([{"row": i, "value": "v" * 50} for i in range(3000)], indent=1)
    result = {
        "content": [
            {
                "type": "resource",
                "resource": {"uri": "db://rows.json", "mimeType": "application/json", "text": doc},
            }
        ]
    }
    out = await rig.offloader().tool_result(tool="query", arguments={}, output_schema=None, result=result)
    assert out is not None
    assert "[text of embedded resource db://rows.json cut: " in out["content"][0]["text"]
    (link,) = links(out)
    assert link["mimeType"] == "application/json"
    assert link["name"] == "rows.json"
    assert (await rig.bytes_of(link["uri"])).decode() == doc


async def test_per_tool_text_threshold_from_the_config(tmp_path: Path) -> None:
    config = tmp_path / "offload.toml"
    config.write_text("[tools.short]\ntext_threshold = 1000\ntext_preview = 100\n")
    async with open_rig(tmp_path) as rig:
        offloader = rig.offloader(config=config)
        result = {"content": [{"type": "text", "text": "z" * 5000}]}
        out = await offloader.tool_result(tool="short", arguments={}, output_schema=None, result=result)
        assert out is not None
        assert out["content"][0]["text"].startswith("z" * 100 + "\n[text cut: showing the first 100 of 5000")
        assert (
            await offloader.tool_result(tool="other", arguments={}, output_schema=None, result=result) is None
        )


async def test_always_offload_tool_stores_short_audio(tmp_path: Path) -> None:
    config = tmp_path / "offload.toml"
    config.write_text('[tools.say]\noffload = "always"\n')
    audio = wav_bytes(0.2)
    async with open_rig(tmp_path) as rig:
        result = {"content": [{"type": "audio", "data": b64(audio), "mimeType": "audio/wav"}]}
        out = await rig.offloader(config=config).tool_result(
            tool="say", arguments={}, output_schema=None, result=result
        )
        assert out is not None
        assert await rig.bytes_of(links(out)[0]["uri"]) == audio


async def test_other_blocks_and_result_fields_are_kept(rig: Rig) -> None:
    link = {"type": "resource_link", "uri": "file:///a.txt", "name": "a.txt"}
    result = {
        "content": [link, {"type": "text", "text": "q" * 100_000}],
        "isError": False,
        "_meta": {"upstream/trace": "abc"},
    }
    out = await rig.offloader().tool_result(tool="t", arguments={}, output_schema=None, result=result)
    assert out is not None
    assert out["content"][0] == link
    assert out["isError"] is False
    assert out["_meta"] == {"upstream/trace": "abc"}

"""The per-result budget: the arithmetic, largest-first offloading, and the cap property over random mixes."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import random
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import validate

from blobstore.tokens import estimate_image_tokens
from mcp_resources.proxy.offload import ENVELOPE_BYTES, measure
from mcp_resources.proxy.rules import HOST_PROFILES, HostProfile, load_rules
from tests.proxy.offload_fixtures import (
    Rig,
    b64,
    fake_pdf,
    flat_png,
    image_block,
    links,
    open_rig,
    photo_png,
    wav_bytes,
)


def test_text_costs_its_json_bytes_over_four() -> None:
    result = {"content": [{"type": "text", "text": "é" * 1000}]}
    size, tokens = measure(result)
    body = len(json.dumps(result, separators=(",", ":"), ensure_ascii=False).encode())
    assert size == body + ENVELOPE_BYTES
    assert tokens == math.ceil(size / 4)


def test_an_inline_image_costs_its_pixels_not_its_base64() -> None:
    block = image_block(flat_png(1920, 1080))
    result = {"content": [block, {"type": "text", "text": "caption"}]}
    size, tokens = measure(result)
    assert tokens == estimate_image_tokens(1920, 1080) + math.ceil((size - len(block["data"])) / 4)
    assert estimate_image_tokens(1920, 1080) < len(block["data"]) / 4


async def test_largest_block_goes_first_and_only_as_many_as_needed(rig: Rig) -> None:
    sizes = [40_000, 50_000, 30_000, 5_000]  # each under the 64 KiB threshold; about 31,000 tokens in all
    result = {"content": [{"type": "text", "text": str(i) * n} for i, n in enumerate(sizes)]}
    out = await rig.offloader(profile="claude-code").tool_result(
        tool="t", arguments={}, output_schema=None, result=result
    )
    assert out is not None
    assert out["content"][0] == result["content"][0]
    assert out["content"][1]["text"].startswith("1" * 100)
    assert "[text cut: " in out["content"][1]["text"]
    assert out["content"][2:4] == [links(out)[0], result["content"][2]]
    assert out["content"][4] == result["content"][3]
    assert measure(out)[1] <= 25_000


async def test_claude_desktop_takes_more_than_claude_code(rig: Rig) -> None:
    result = {"content": [{"type": "text", "text": "a" * 50_000} for _ in range(3)]}
    assert (
        await rig.offloader(profile="claude-desktop").tool_result(
            tool="t", arguments={}, output_schema=None, result=result
        )
        is None
    )
    out = await rig.offloader(profile="claude-code").tool_result(
        tool="t", arguments={}, output_schema=None, result=result
    )
    assert out is not None
    assert measure(out)[1] <= 25_000


async def test_a_text_claude_code_would_write_to_a_file_is_offloaded_and_claude_desktop_keeps_it(
    rig: Rig,
) -> None:
    result = {"content": [{"type": "text", "text": "b" * 60_000}]}
    assert (
        await rig.offloader(profile="claude-desktop").tool_result(
            tool="t", arguments={}, output_schema=None, result=result
        )
        is None
    )
    out = await rig.offloader(profile="claude-code").tool_result(
        tool="t", arguments={}, output_schema=None, result=result
    )
    assert out is not None
    (link,) = links(out)
    assert await rig.bytes_of(link["uri"]) == b"b" * 60_000
    assert all(len(block.get("text", "")) < 50_000 for block in out["content"])


async def test_many_small_blocks_over_the_cap_end_as_one_stored_result(rig: Rig) -> None:
    # 3,000 short texts: offloading any one of them saves nothing, so the result is stored whole.
    result = {"content": [{"type": "text", "text": f"row {i}: " + "v" * 40} for i in range(3000)]}
    out = await rig.offloader(profile="claude-code").tool_result(
        tool="rows", arguments={}, output_schema=None, result=result
    )
    assert out is not None
    assert "isError" not in out
    (link,) = links(out)
    assert json.loads(await rig.bytes_of(link["uri"])) == result
    assert measure(out)[1] <= 25_000


# -- the property -----------------------------------------------------------------------------------------

IMAGES = {
    "icon": flat_png(64, 64),
    "wide": flat_png(2400, 300, (10, 200, 90)),
    "photo": photo_png(900, 600, seed=5),
}
AUDIO = {seconds: wav_bytes(seconds) for seconds in (0.2, 3.0, 20.0)}

MIRROR_SCHEMA = {
    "type": "object",
    "properties": {"content": {"type": "array", "items": {"type": "object", "required": ["type"]}}},
    "required": ["content"],
}

blocks = st.one_of(
    st.tuples(st.just("text"), st.integers(0, 150_000)),
    st.tuples(st.just("image"), st.sampled_from(sorted(IMAGES))),
    st.tuples(st.just("audio"), st.sampled_from(sorted(AUDIO))),
    st.tuples(st.just("blob"), st.integers(1, 800_000)),
    st.tuples(st.just("resource-text"), st.integers(0, 150_000)),
    st.tuples(st.just("link"), st.just(0)),
)


def make_block(kind: str, value: Any, rng: random.Random) -> dict[str, Any]:
    if kind == "text":
        return {"type": "text", "text": "t" * value}
    if kind == "image":
        return image_block(IMAGES[value])
    if kind == "audio":
        return {"type": "audio", "data": b64(AUDIO[value]), "mimeType": "audio/wav"}
    if kind == "blob":
        data = fake_pdf(max(value, 16), seed=rng.randrange(1 << 30))
        return {
            "type": "resource",
            "resource": {"uri": "x://f.pdf", "mimeType": "application/pdf", "blob": b64(data)},
        }
    if kind == "resource-text":
        return {
            "type": "resource",
            "resource": {"uri": "x://f.txt", "mimeType": "text/plain", "text": "r" * value},
        }
    return {"type": "resource_link", "uri": "file:///x", "name": "x"}


def test_no_offloaded_result_exceeds_its_profile_caps(tmp_path: Path) -> None:
    with asyncio.Runner() as runner:
        stack = AsyncExitStack()
        rig: Rig = runner.run(stack.enter_async_context(open_rig(tmp_path)))
        offloaders = {name: rig.offloader(profile=name) for name in HOST_PROFILES}
        seen = {"unchanged": 0, "offloaded": 0}
        try:

            @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
            @given(
                mix=st.lists(blocks, min_size=1, max_size=8),
                profile=st.sampled_from(sorted(HOST_PROFILES)),
                mirror=st.booleans(),
                seed=st.integers(0, 1 << 30),
            )
            def check(mix: list[tuple[str, Any]], profile: str, mirror: bool, seed: int) -> None:
                rng = random.Random(seed)
                content = [make_block(kind, value, rng) for kind, value in mix]
                result: dict[str, Any] = {"content": content}
                schema = None
                if mirror:
                    result["structuredContent"] = {"content": [dict(block) for block in content]}
                    schema = MIRROR_SCHEMA
                out = runner.run(
                    offloaders[profile].tool_result(
                        tool="mix", arguments={"seed": seed}, output_schema=schema, result=result
                    )
                )
                if out is not None and "structuredContent" in out:
                    validate(out["structuredContent"], MIRROR_SCHEMA)
                seen["unchanged" if out is None else "offloaded"] += 1
                size, tokens = measure(out if out is not None else result)
                caps = HOST_PROFILES[profile]
                assert size <= caps.max_result_bytes
                assert tokens <= caps.max_result_tokens

            check()
            # The mixes exercised both ways out, not just one.
            assert seen["unchanged"] > 0
            assert seen["offloaded"] > 0
        finally:
            runner.run(stack.aclose())


async def test_over_the_token_cap_images_are_halved_before_any_is_only_linked(rig: Rig) -> None:
    # 30 images of 1024x768 px: about 1,036 tokens each, 31,000 in all, over claude-code's 25,000.
    shots = [image_block(flat_png(1024, 768, (i * 8, 90, 160))) for i in range(30)]
    out = await rig.offloader(profile="claude-code").tool_result(
        tool="gallery", arguments={}, output_schema=None, result={"content": shots}
    )
    assert out is not None
    assert measure(out)[1] <= 25_000
    images = [b for b in out["content"] if b["type"] == "image"]
    assert len(images) == 30
    halved = [b for b in images if b not in shots]
    assert halved
    assert all(b["_meta"]["dev.blobstore/artifact"]["width"] == 512 for b in halved)
    assert len(links(out)) == len(halved)


async def test_an_image_left_only_as_a_link_by_the_budget_says_so(rig: Rig) -> None:
    # A host whose 550 tokens take a line and a link but not the 1000 px image, nor its 500 px half.
    rules = load_rules(rig.settings, profile="generic", config_path=None, read_tool_hint=True)
    small = dataclasses.replace(rules, profile=HostProfile("small-host", 1 << 20, 550, 8000))
    out = await rig.offloader(rules=small).tool_result(
        tool="t", arguments={}, output_schema=None, result={"content": [image_block(flat_png(1000, 1000))]}
    )
    assert out is not None
    assert [b["type"] for b in out["content"]] == ["text", "resource_link"]
    line = out["content"][0]["text"]
    assert (
        "1000x1000 px) is not shown inline (the result is over the small-host host's caps of 1048576 bytes"
        in line
    )
    assert "and 550 tokens" in line
    assert "inline limit" not in line

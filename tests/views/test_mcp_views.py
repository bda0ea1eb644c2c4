"""Media views through the official MCP client: ``read_artifact``'s view arguments and the view resources, in
both protocol eras, in memory, over streamable HTTP and over stdio."""

from __future__ import annotations

import base64
import io
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError
from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)
from PIL import Image

from tests.views import media
from tests.views.conftest import PDF_PAGES, TRANSPORTS, MediaSet, connect


def uri(media_set: MediaSet, name: str) -> str:
    return f"blobstore://artifacts/{media_set.ids[name]}"


def texts(result: CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, TextContent)]


def view_error(result: CallToolResult) -> str:
    assert result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    code: str = result.structured_content["error"]["code"]
    return code


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_pages_say_what_they_are_hold_their_marker_and_name_the_next_read(
    transport: str, media_set: MediaSet, request: pytest.FixtureRequest
) -> None:
    async with connect(transport, media_set, request) as client:
        result = await client.call_tool(
            "read_artifact", {"uri": uri(media_set, "report.pdf"), "pages": "3-5"}
        )
    assert not result.is_error, result.content
    first, *pages, last = texts(result)
    assert first.startswith(f"report.pdf, pages 3-5 of {PDF_PAGES}, text layer; about ")
    assert last == 'Next: read_artifact(uri, pages="6-8").'
    for page, text in zip((3, 4, 5), pages, strict=True):
        found = [other for other in range(1, PDF_PAGES + 1) if media.marker(other) in text]
        assert found == [page]
    assert isinstance(result.structured_content, dict)
    view: dict[str, Any] = result.structured_content["view"]
    assert (view["pages"], view["page_count"], view["text_layer"]) == ([3, 4, 5], PDF_PAGES, [True] * 3)


async def test_an_audio_segment_is_an_audio_block_of_16_khz_mono_with_its_times(
    transport: str, media_set: MediaSet, request: pytest.FixtureRequest
) -> None:
    arguments = {"uri": uri(media_set, "pattern.wav"), "start_seconds": 40, "duration_seconds": 30}
    async with connect(transport, media_set, request) as client:
        result = await client.call_tool("read_artifact", arguments)
    assert not result.is_error, result.content
    head, block, tail = result.content
    assert isinstance(head, TextContent)
    assert isinstance(block, AudioContent)
    assert isinstance(tail, TextContent)
    assert head.text.startswith("pattern.wav, 40.0-70.0 s of 70.0 s, 16 kHz mono WAV; about 960 tokens")
    assert tail.text == "That segment reaches the end of the recording."
    channels, rate, _, pcm = media.samples_of(base64.b64decode(block.data))
    assert (channels, rate, len(pcm)) == (1, 16_000, 2 * 30 * 16_000)
    # The structured view states the first line's estimate, as for every other kind of view.
    assert isinstance(result.structured_content, dict)
    view = result.structured_content["view"]
    assert (view["kind"], view["start_seconds"], view["end_seconds"]) == ("audio", 40.0, 70.0)
    assert view["estimated_tokens"] == 960


async def test_frames_and_regions_come_as_images_between_their_lines(
    transport: str, media_set: MediaSet, request: pytest.FixtureRequest
) -> None:
    async with connect(transport, media_set, request) as client:
        scenes = await client.call_tool("read_artifact", {"uri": uri(media_set, "scenes.mp4"), "frames": 3})
        frames = await client.call_tool(
            "read_artifact", {"uri": uri(media_set, "clip.mp4"), "frames": 3, "frames_mode": "even"}
        )
        region = await client.call_tool(
            "read_artifact", {"uri": uri(media_set, "picture.png"), "region": "0,0,300,200", "max_edge": 150}
        )
    # By default a frame of each scene, the first line saying how many scenes there are and where they start.
    assert not scenes.is_error, scenes.content
    assert texts(scenes)[0].startswith(
        "scenes.mp4, 3 scenes in 6.0 s (320x240), starting at 0.0, 2.0 and 4.0 s; each shown, one frame a "
        "scene; about "
    )
    assert texts(scenes)[1:-1] == [
        "scene 0.0-2.0 s, frame at 0.5 s",
        "scene 2.0-4.0 s, frame at 2.5 s",
        "scene 4.0-6.0 s, frame at 4.5 s",
    ]
    assert sum(isinstance(block, ImageContent) for block in scenes.content) == 3
    assert isinstance(scenes.structured_content, dict)
    assert scenes.structured_content["view"]["scene_starts"] == [0.0, 2.0, 4.0]
    assert not frames.is_error, frames.content
    assert texts(frames)[0].startswith("clip.mp4, 3 keyframes of 6.0 s (320x240); about ")
    assert [t for t in texts(frames) if t.startswith("keyframe at")] == [
        "keyframe at 1.0 s",
        "keyframe at 3.0 s",
        "keyframe at 5.0 s",
    ]
    assert sum(isinstance(block, ImageContent) for block in frames.content) == 3
    assert not region.is_error, region.content
    assert texts(region)[0].startswith("picture.png, region 0,0,300,200 of 600x400 px, shown at 150x100 px")
    (image,) = [block for block in region.content if isinstance(block, ImageContent)]
    with Image.open(io.BytesIO(base64.b64decode(image.data))) as decoded:
        assert decoded.size == (150, 100)


async def test_view_resources_are_listed_and_read(
    transport: str, media_set: MediaSet, request: pytest.FixtureRequest
) -> None:
    pdf, wav = media_set.ids["report.pdf"], media_set.ids["pattern.wav"]
    async with connect(transport, media_set, request) as client:
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
        text = (await client.read_resource(f"blobstore://artifacts/{pdf}/pages/9.txt")).contents[0]
        png = (await client.read_resource(f"blobstore://artifacts/{pdf}/pages/9.png")).contents[0]
        audio = (
            await client.read_resource(f"blobstore://artifacts/{wav}/audio?start=5&duration=2.5")
        ).contents[0]
        with pytest.raises(MCPError) as past:
            await client.read_resource(f"blobstore://artifacts/{pdf}/pages/{PDF_PAGES + 1}.txt")
    assert {
        "blobstore://artifacts/{artifact_id}/pages/{page}.txt",
        "blobstore://artifacts/{artifact_id}/pages/{page}.png",
        "blobstore://artifacts/{artifact_id}/audio{?start,duration}",
    } <= templates
    assert isinstance(text, TextResourceContents)
    assert media.marker(9) in text.text
    assert media.marker(8) not in text.text
    assert isinstance(png, BlobResourceContents)
    assert png.mime_type == "image/png"
    assert base64.b64decode(png.blob).startswith(b"\x89PNG")
    assert isinstance(audio, BlobResourceContents)
    assert audio.mime_type == "audio/wav"
    channels, rate, _, pcm = media.samples_of(base64.b64decode(audio.blob))
    assert (channels, rate, len(pcm)) == (1, 16_000, 2 * 40_000)
    assert past.value.error.message == "Resource not found"
    assert (past.value.error.data["reason"], past.value.error.data["pages"]) == ("not_found", PDF_PAGES)


def configure(media_set: MediaSet, monkeypatch: pytest.MonkeyPatch, **changes: Any) -> None:
    """The servers the test connects run with these settings changed."""
    monkeypatch.setattr(media_set, "settings", media_set.settings.model_copy(update=changes))


@pytest.mark.parametrize("transport", ["memory", "http"], indirect=True)
async def test_views_of_the_wrong_kind_or_beyond_their_limits_are_tool_errors(
    transport: str, media_set: MediaSet, request: pytest.FixtureRequest
) -> None:
    async with connect(transport, media_set, request) as client:
        wrong = await client.call_tool("read_artifact", {"uri": uri(media_set, "pattern.wav"), "pages": "1"})
        many = await client.call_tool("read_artifact", {"uri": uri(media_set, "report.pdf"), "pages": "1-11"})
        long = await client.call_tool(
            "read_artifact",
            {"uri": uri(media_set, "pattern.wav"), "start_seconds": 0, "duration_seconds": 31},
        )
        two = await client.call_tool(
            "read_artifact", {"uri": uri(media_set, "report.pdf"), "pages": "1", "frames": 2}
        )
        foreign = await client.call_tool(
            "read_artifact", {"uri": f"blobstore://artifacts/{media_set.foreign_pdf}", "pages": "1"}
        )
        past = await client.call_tool(
            "read_artifact", {"uri": uri(media_set, "report.pdf"), "pages": f"{PDF_PAGES}-{PDF_PAGES + 1}"}
        )
    assert view_error(wrong) == "unsupported_media"
    assert view_error(many) == "invalid_request"
    assert view_error(long) == "invalid_request"
    assert view_error(two) == "invalid_request"
    assert view_error(foreign) == "not_found"
    # A page past the last is the same catalogue error as over HTTP, with the count to pick another.
    assert view_error(past) == "not_found"
    assert past.structured_content is not None
    assert past.structured_content["error"]["pages"] == PDF_PAGES


@pytest.mark.parametrize("transport", ["memory"], indirect=True)
async def test_a_page_image_over_the_answer_budget_becomes_a_link_to_its_view(
    transport: str, media_set: MediaSet, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure(media_set, monkeypatch, inline_limit=1024, mcp_window_max=1024)
    async with connect(transport, media_set, request) as client:
        result = await client.call_tool(
            "read_artifact", {"uri": uri(media_set, "report.pdf"), "pages": "2", "page_format": "image"}
        )
    assert not result.is_error, result.content
    (link,) = [block for block in result.content if isinstance(block, ResourceLink)]
    assert link.uri == f"{uri(media_set, 'report.pdf')}/pages/2.png"


@pytest.mark.parametrize("transport", ["memory"], indirect=True)
async def test_an_audio_segment_over_the_answer_budget_becomes_a_link_to_its_audio_resource(
    transport: str, media_set: MediaSet, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure(media_set, monkeypatch, inline_limit=1024, mcp_window_max=1024)
    arguments = {"uri": uri(media_set, "pattern.wav"), "start_seconds": 10, "duration_seconds": 2}
    async with connect(transport, media_set, request) as client:
        result = await client.call_tool("read_artifact", arguments)
        assert not result.is_error, result.content
        (link,) = [block for block in result.content if isinstance(block, ResourceLink)]
        read = (await client.read_resource(str(link.uri))).contents[0]
    assert not any(isinstance(block, AudioContent) for block in result.content)
    assert link.uri == f"{uri(media_set, 'pattern.wav')}/audio?start=10&duration=2"
    assert isinstance(result.structured_content, dict)
    assert result.structured_content["view"]["estimated_tokens"] == 0
    assert isinstance(read, BlobResourceContents)
    channels, rate, _, pcm = media.samples_of(base64.b64decode(read.blob))
    assert (channels, rate, len(pcm)) == (1, 16_000, 2 * 2 * 16_000)


@pytest.mark.parametrize("transport", ["memory"], indirect=True)
async def test_a_page_format_or_frames_layout_without_its_view_is_refused_not_read_as_bytes(
    transport: str, media_set: MediaSet, request: pytest.FixtureRequest
) -> None:
    async with connect(transport, media_set, request) as client:
        image = await client.call_tool(
            "read_artifact", {"uri": uri(media_set, "report.pdf"), "page_format": "image"}
        )
        sheet = await client.call_tool(
            "read_artifact", {"uri": uri(media_set, "clip.mp4"), "frames_layout": "sheet"}
        )
        # The defaults, sent as a client fills in a schema, still read bytes.
        plain = await client.call_tool(
            "read_artifact",
            {"uri": uri(media_set, "clip.mp4"), "page_format": "text", "frames_layout": "frames"},
        )
    assert view_error(image) == "invalid_request"
    assert "pages" in texts(image)[0]
    assert view_error(sheet) == "invalid_request"
    assert "frames" in texts(sheet)[0]
    assert not plain.is_error, plain.content
    assert isinstance(plain.structured_content, dict)
    assert "window" in plain.structured_content


@pytest.mark.parametrize("transport", ["memory"], indirect=True)
async def test_a_30_second_segment_at_any_start_is_estimated_at_960_tokens(
    transport: str, media_set: MediaSet, request: pytest.FixtureRequest
) -> None:
    # 32 tokens a second of 30 s, whatever rounding the start's and end's floating-point values carry.
    async with connect(transport, media_set, request) as client:
        for start in (2.2, 6.7, 12.7):
            arguments = {"uri": uri(media_set, "pattern.wav"), "start_seconds": start, "duration_seconds": 30}
            result = await client.call_tool("read_artifact", arguments)
            assert not result.is_error, result.content
            assert texts(result)[0].endswith(", 16 kHz mono WAV; about 960 tokens."), (start, texts(result))
            assert isinstance(result.structured_content, dict)
            assert result.structured_content["view"]["estimated_tokens"] == 960


@pytest.mark.parametrize("transport", ["memory"], indirect=True)
async def test_more_frames_than_the_video_has_keyframes_show_each_keyframe_once(
    transport: str, media_set: MediaSet, request: pytest.FixtureRequest
) -> None:
    # short.mp4 is 2 s with a keyframe at 0 s and at 1 s: eight evenly spaced times land on those two.
    async with connect(transport, media_set, request) as client:
        even = {"uri": uri(media_set, "short.mp4"), "frames": 8, "frames_mode": "even"}
        frames = await client.call_tool("read_artifact", even)
        sheet = await client.call_tool("read_artifact", {**even, "frames_layout": "sheet"})
    assert not frames.is_error, frames.content
    head = texts(frames)[0]
    assert head.startswith("short.mp4, 2 keyframes of 2.0 s (320x240)"), head
    assert "8 asked" in head
    assert [t for t in texts(frames) if t.startswith("keyframe at")] == [
        "keyframe at 0.0 s",
        "keyframe at 1.0 s",
    ]
    assert sum(isinstance(block, ImageContent) for block in frames.content) == 2
    assert isinstance(frames.structured_content, dict)
    assert frames.structured_content["view"]["times"] == [0.0, 1.0]
    assert not sheet.is_error, sheet.content
    assert "sheet of 0.0 s, 1.0 s" in texts(sheet)
    (image,) = [block for block in sheet.content if isinstance(block, ImageContent)]
    with Image.open(io.BytesIO(base64.b64decode(image.data))) as decoded:
        # Two cells side by side, not a 3x3 grid of eight.
        assert decoded.width == 2 * decoded.height * 320 // 240


@pytest.mark.parametrize("transport", ["memory"], indirect=True)
async def test_the_read_tool_states_the_configured_page_and_segment_limits(
    transport: str, media_set: MediaSet, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure(media_set, monkeypatch, view_max_pages=4, view_max_audio_seconds=12.5)
    async with connect(transport, media_set, request) as client:
        (tool,) = [tool for tool in (await client.list_tools()).tools if tool.name == "read_artifact"]
        five = await client.call_tool("read_artifact", {"uri": uri(media_set, "report.pdf"), "pages": "1-5"})
    properties = tool.input_schema["properties"]
    # A model reads the limits from the schema: the numbers this server enforces, not a setting's name.
    assert "at most 4 per call" in properties["pages"]["description"]
    assert "default and most 12.5" in properties["duration_seconds"]["description"]
    assert view_error(five) == "invalid_request"


@pytest.mark.parametrize("transport", ["memory"], indirect=True)
async def test_a_videos_sound_is_read_as_audio_segments_and_its_frames_say_so(
    transport: str, media_set: MediaSet, request: pytest.FixtureRequest
) -> None:
    from blobstore.runtime import open_service
    from tests.mcp.conftest import put

    async with open_service(media_set.settings) as service:
        film = await put(service, media.video_with_sound(20), "film.mp4")
    assert (film.mime_type, film.media["duration_seconds"]) == ("video/mp4", 20.0)
    async with connect(transport, media_set, request) as client:
        segment = await client.call_tool(
            "read_artifact", {"uri": film.uri, "start_seconds": 5, "duration_seconds": 2}
        )
        frames = await client.call_tool("read_artifact", {"uri": film.uri, "frames": 2})
    assert not segment.is_error, segment.content
    head, block, tail = segment.content
    assert isinstance(head, TextContent)
    assert head.text == "film.mp4, 5.0-7.0 s of 20.0 s, 16 kHz mono WAV; about 64 tokens."
    assert isinstance(block, AudioContent)
    channels, rate, _, pcm = media.samples_of(base64.b64decode(block.data))
    assert (channels, rate, len(pcm)) == (1, 16_000, 2 * 2 * 16_000)
    assert abs(media.sweep_lag(pcm, 5.0)) <= 48
    assert isinstance(tail, TextContent)
    assert tail.text == "Next: read_artifact(uri, start_seconds=7.0, duration_seconds=2)."
    assert not frames.is_error, frames.content
    assert texts(frames)[-1].startswith("Hear it with read_artifact(uri, start_seconds=0).")


@pytest.mark.parametrize("transport", ["memory"], indirect=True)
async def test_the_first_line_names_pages_without_a_text_layer_in_good_grammar(
    transport: str, media_set: MediaSet, request: pytest.FixtureRequest
) -> None:
    async with connect(transport, media_set, request) as client:
        one = await client.call_tool("read_artifact", {"uri": uri(media_set, "scan.pdf"), "pages": "1"})
        two = await client.call_tool("read_artifact", {"uri": uri(media_set, "scan.pdf"), "pages": "1-2"})
    assert "; page 1 has no text layer and is shown as an image; about " in texts(one)[0]
    assert "; pages 1-2 have no text layer and are shown as images; about " in texts(two)[0]


@pytest.mark.parametrize("transport", ["memory"], indirect=True)
async def test_following_the_next_segment_hint_continues_at_the_exact_sample(
    transport: str, media_set: MediaSet, request: pytest.FixtureRequest
) -> None:
    import re

    arguments: dict[str, Any] = {"uri": uri(media_set, "pattern.wav"), "start_seconds": 12.34}
    async with connect(transport, media_set, request) as client:
        first = await client.call_tool("read_artifact", arguments)
        head, tail = texts(first)
        found = re.fullmatch(
            r"Next: read_artifact\(uri, start_seconds=([\d.]+), duration_seconds=([\d.]+)\)\.", tail
        )
        assert found is not None, tail
        start, duration = float(found.group(1)), float(found.group(2))
        second = await client.call_tool(
            "read_artifact", {**arguments, "start_seconds": start, "duration_seconds": duration}
        )
    # The line gives the exact times, and the hint starts the next segment where this one ended.
    assert head.startswith("pattern.wav, 12.34-42.34 s of 70.0 s, "), head
    assert (start, duration) == (42.34, 27.66)
    (audio,) = [block for block in second.content if isinstance(block, AudioContent)]
    _, _, _, pcm = media.samples_of(base64.b64decode(audio.data))
    assert pcm[:2] == media.pattern_sample(round(42.34 * 16_000)).to_bytes(2, "little", signed=True)
    assert texts(second)[-1] == "That segment reaches the end of the recording."


@pytest.mark.parametrize("transport", ["memory"], indirect=True)
async def test_a_page_text_over_the_answer_budget_becomes_a_link_to_its_text_resource(
    transport: str, media_set: MediaSet, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A budget below one marker's 15 bytes: every page's text is over it.
    configure(media_set, monkeypatch, inline_limit=8, mcp_window_max=8)
    report = uri(media_set, "report.pdf")
    async with connect(transport, media_set, request) as client:
        result = await client.call_tool("read_artifact", {"uri": report, "pages": "1-2"})
        assert not result.is_error, result.content
        links = [block for block in result.content if isinstance(block, ResourceLink)]
        read = [(await client.read_resource(str(link.uri))).contents[0] for link in links]
    # Text counts against the inline budget like any block: past it, the page is a link to its text.
    assert [str(link.uri) for link in links] == [f"{report}/pages/1.txt", f"{report}/pages/2.txt"]
    for number, contents in enumerate(read, 1):
        assert isinstance(contents, TextResourceContents)
        assert media.marker(number) in contents.text
    assert not any(media.marker(n) in text for n in (1, 2) for text in texts(result))
    assert isinstance(result.structured_content, dict)
    assert result.structured_content["view"]["estimated_tokens"] == 0


@pytest.mark.parametrize("transport", ["memory"], indirect=True)
async def test_a_page_image_over_the_budget_links_to_the_size_that_was_asked_for(
    transport: str, media_set: MediaSet, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure(media_set, monkeypatch, inline_limit=64, mcp_window_max=64)
    report = uri(media_set, "report.pdf")
    arguments = {"uri": report, "pages": "2", "page_format": "image", "max_edge": 300}
    async with connect(transport, media_set, request) as client:
        result = await client.call_tool("read_artifact", arguments)
        (link,) = [block for block in result.content if isinstance(block, ResourceLink)]
        read = (await client.read_resource(str(link.uri))).contents[0]
    assert str(link.uri) == f"{report}/pages/2.png?max_edge=300"
    assert isinstance(read, BlobResourceContents)
    data = base64.b64decode(read.blob)
    assert link.size == len(data)
    with Image.open(io.BytesIO(data)) as image:
        assert max(image.size) == 300


@pytest.mark.parametrize("transport", ["memory"], indirect=True)
async def test_the_view_templates_state_the_configured_budgets(
    transport: str, media_set: MediaSet, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure(media_set, monkeypatch, view_max_audio_seconds=12.5, image_long_edge=800)
    async with connect(transport, media_set, request) as client:
        templates = {t.name: t for t in (await client.list_resource_templates()).resource_templates}
    assert "800 px" in str(templates["artifact-page-image"].description)
    assert "12.5 s" in str(templates["artifact-audio"].description)
    assert "30 s" not in str(templates["artifact-audio"].description)

"""Text for the eye through the edges: ``read_artifact(uri, include_media=false)`` answers an image with what
OCR read on it and a link to the original, over real transports, on text printed in a real font and on a real
screenshot (headless Chromium rendering Debian's libffi manual); beside view arguments it answers each view in
text alone (pages as their text, a video's frames as its scene list, a region as its OCR text)."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from mcp.types import AudioContent, CallToolResult, ImageContent, ResourceLink, TextContent

from blobstore.runtime import open_service
from tests.fixtures.browser import CHROMIUM, NODE, playwright_ready
from tests.mcp.conftest import put
from tests.views import media
from tests.views.conftest import PRINTED_LINES, MediaSet, connect

JS_DIR = Path(__file__).parent / "js"
LIBFFI_PAGE = Path("/usr/share/doc/libffi-dev/html/The-Basics.html")


def texts(result: CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, TextContent)]


@pytest.mark.parametrize("transport", ["memory", "stdio-legacy", "http"])
async def test_an_image_read_without_media_is_its_ocr_text_with_a_link(
    transport: str, media_set: MediaSet, request: pytest.FixtureRequest
) -> None:
    uri = f"blobstore://artifacts/{media_set.ids['printed.png']}"
    async with connect(transport, media_set, request) as client:
        result = await client.call_tool("read_artifact", {"uri": uri, "include_media": False})
        plain = await client.call_tool("read_artifact", {"uri": uri})
    assert not result.is_error, result.content
    head, text, link, tail = result.content
    assert isinstance(head, TextContent)
    assert isinstance(text, TextContent)
    assert isinstance(link, ResourceLink)
    assert isinstance(tail, TextContent)
    assert head.text.startswith("printed.png (image/png")
    assert "its OCR text in place of the image (include_media=false asks for text)" in head.text
    assert "13 words in 2 lines, 0 under 0.9 confidence marked [?word]" in head.text
    assert text.text.split() == " ".join(PRINTED_LINES).split()
    assert link.uri == uri
    assert isinstance(result.structured_content, dict)
    assert result.structured_content["view"]["what"] == "OCR text"
    # A host that takes images (a store alone assumes it does) reads the bytes by default.
    assert "bytes 0-" in str(plain.content[0])


@pytest.fixture(scope="module")
def screenshot(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, list[str]]:
    """A 640x400 screenshot of a page of Debian's libffi manual, and the words the page shows there."""
    playwright_ready(JS_DIR)
    assert NODE is not None
    folder = tmp_path_factory.mktemp("screenshot")
    config = {
        "chromium": str(CHROMIUM),
        "url": LIBFFI_PAGE.as_uri(),
        "png": str(folder / "shot.png"),
        "text": str(folder / "shot.txt"),
        "width": 640,
        "height": 400,
        "scale": 1,
    }
    (folder / "config.json").write_text(json.dumps(config))
    subprocess.run(
        [NODE, str(JS_DIR / "screenshot.mjs"), str(folder / "config.json")], check=True, timeout=120
    )
    return (folder / "shot.png").read_bytes(), (folder / "shot.txt").read_text().split()


async def test_a_real_screenshot_reads_as_the_words_the_page_shows(
    screenshot: tuple[bytes, list[str]], media_set: MediaSet, request: pytest.FixtureRequest
) -> None:
    png, truth = screenshot
    async with open_service(media_set.settings) as service:
        artifact = await put(service, png, "libffi-basics.png")
    async with connect("stdio", media_set, request) as client:
        result = await client.call_tool(
            "read_artifact", {"uri": f"blobstore://artifacts/{artifact.id}", "include_media": False}
        )
    assert not result.is_error, result.content
    text = result.content[1]
    assert isinstance(text, TextContent)
    # Words marked [?word] count as read: the mark says they are to be confirmed, not that they are wrong.
    read = Counter(word.removeprefix("[?").removesuffix("]") for word in text.text.split())
    found = sum((read & Counter(truth)).values())
    assert len(truth) > 100
    assert found / len(truth) > 0.75, (found, len(truth), text.text)


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_view_arguments_with_include_media_false_are_answered_in_text_alone(
    transport: str, media_set: MediaSet, request: pytest.FixtureRequest
) -> None:
    def call(name: str, **arguments: object) -> tuple[str, dict[str, object]]:
        uri = f"blobstore://artifacts/{media_set.ids[name]}"
        return "read_artifact", {"uri": uri, **arguments, "include_media": False}

    async with connect(transport, media_set, request) as client:
        pages = await client.call_tool(*call("report.pdf", pages="2-3"))
        scan = await client.call_tool(*call("scan.pdf", pages="1"))
        scenes = await client.call_tool(*call("scenes.mp4", frames=2))
        region = await client.call_tool(*call("printed.png", region="0,60,600,78", max_edge=200))
        segment = await client.call_tool(*call("speech.wav", start_seconds=10, duration_seconds=5))
        images = await client.call_tool(*call("report.pdf", pages="1", page_format="image"))
        even = await client.call_tool(*call("scenes.mp4", frames=2, frames_mode="even"))
    for result in (pages, scan, scenes, region):
        assert not result.is_error, result.content
        assert not [block for block in result.content if isinstance(block, ImageContent | AudioContent)]
    assert [text for text in texts(pages) if text.startswith("--- page")] == [
        f"--- page 2 of 12 ---\n{media.marker(2)}",
        f"--- page 3 of 12 ---\n{media.marker(3)}",
    ]
    # A page with no text layer, on which OCR reads nothing, is linked as its image, not shown.
    assert "page 1 has no text layer and is linked as an image" in texts(scan)[0]
    (link,) = [block for block in scan.content if isinstance(block, ResourceLink)]
    assert (link.uri, link.mime_type) == (
        f"blobstore://artifacts/{media_set.ids['scan.pdf']}/pages/1.png",
        "image/png",
    )
    # A video's frames in text are its scene list, the scenes frames=2 would show marked.
    head, listed, tail = texts(scenes)
    assert head.startswith(
        "scenes.mp4, 3 scenes in 6.0 s (320x240), starting at 0.0, 2.0 and 4.0 s; the scene list as text "
        "(include_media=false), the 2 longest (frames=2 shows them) marked *; about "
    )
    assert listed.splitlines() == [
        "scene 1: 0.0-2.0 s (2.0 s) *",
        "scene 2: 2.0-4.0 s (2.0 s) *",
        "scene 3: 4.0-6.0 s (2.0 s)",
    ]
    assert tail == "See the scenes with read_artifact(uri, frames=N)."
    # A region in text is what OCR reads on it.
    assert texts(region)[0].startswith("printed.png, OCR text of region 0,60,558,78 of 558x138 px: 6 words")
    assert texts(region)[1] == PRINTED_LINES[1]
    # A segment's text is what was said in it: its window's transcript (the second voice, 11.4-12.9 s).
    assert not segment.is_error, segment.content
    assert not [block for block in segment.content if isinstance(block, AudioContent)]
    head, said, tail = texts(segment)
    assert head.startswith("speech.wav, transcript of 10.0-12.908 s of 12.908 s by pocketsphinx 5.")
    assert "(en-us): 1 segment" in head
    (line,) = said.splitlines()
    assert line.endswith(" left"), line  # "Front Left": the side is heard; a model reads "front" or not
    assert 11.0 < float(line[1:].split("-")[0]) < 12.0
    assert tail == "That transcript reaches the end of the recording."
    for refused in (images, even):
        assert refused.is_error
        assert isinstance(refused.structured_content, dict)
        assert refused.structured_content["error"]["code"] == "invalid_request"

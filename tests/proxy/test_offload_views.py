"""``blobstore proxy`` in front of server-filesystem serving a PDF and a WAV: the offload lines name the media
facts and the view to read next, and those views, read through the proxy, return the right page and the right
samples.

server-filesystem sends a PDF as an embedded ``resource`` typed ``application/octet-stream`` and a WAV as an
``audio`` block; the WAV is long enough to be streamed into the store's staging as it arrives, the PDF is
small and stored whole (the offload config makes the proxy store every ``read_media_file`` result).
"""

from __future__ import annotations

import base64
import io
import re
import wave
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client
from mcp.types import AudioContent, CallToolResult, ResourceLink, TextContent, TextResourceContents

from mcp_resources.proxy.offload import Offloader
from tests.proxy.conftest import filesystem_upstream, proxy_params
from tests.proxy.offload_fixtures import Rig, b64, links, text_of
from tests.views import media

pytestmark = pytest.mark.usefixtures("npm_servers")

PDF_PAGES = 5
WAV_SECONDS = 75
RATE = 16_000


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("media")
    (root / "report.pdf").write_bytes(media.text_pdf(PDF_PAGES))
    (root / "meeting.wav").write_bytes(media.pattern_wav(WAV_SECONDS, RATE))
    return root


@pytest.fixture
def offload_config(tmp_path: Path) -> Path:
    config = tmp_path / "offload.toml"
    config.write_text('always_offload = ["read_media_file"]\n')
    return config


def line_and_link(result: CallToolResult) -> tuple[str, ResourceLink]:
    assert not result.is_error, result.content
    texts = [block.text for block in result.content if isinstance(block, TextContent)]
    links = [block for block in result.content if isinstance(block, ResourceLink)]
    assert len(texts) == 1, result.content
    assert len(links) == 1, result.content
    return texts[0], links[0]


def view_text(result: CallToolResult) -> str:
    assert not result.is_error, result.content
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_an_offloaded_pdfs_line_names_its_pages_and_the_page_read_returns_that_page_alone(
    files: Path, data_dir: Path, offload_config: Path, mode: str
) -> None:
    params = proxy_params(data_dir, filesystem_upstream(files), "--offload-config", str(offload_config))
    async with Client(params, mode=mode) as client:
        line, link = line_and_link(
            await client.call_tool("read_media_file", {"path": str(files / "report.pdf")})
        )
        pages = {
            n: await client.call_tool("read_artifact", {"uri": str(link.uri), "pages": str(n)})
            for n in (2, 4)
        }
    assert link.mime_type == "application/pdf"
    assert f"{PDF_PAGES} pages, text layer" in line
    assert 'read page 1 with read_artifact(uri, pages="1")' in line
    assert str(link.uri) in line
    assert link.description is not None
    assert link.description.endswith('5 pages, text layer); read page 1 with read_artifact(uri, pages="1")')
    for number, result in pages.items():
        text = view_text(result)
        assert text.startswith(f"report.pdf, page {number} of {PDF_PAGES}, text layer"), text
        assert [n for n in range(1, PDF_PAGES + 1) if media.marker(n) in text] == [number]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_an_offloaded_wavs_line_names_its_duration_and_a_30_s_segment_is_the_source_at_that_time(
    files: Path, data_dir: Path, mode: str
) -> None:
    async with Client(proxy_params(data_dir, filesystem_upstream(files)), mode=mode) as client:
        line, link = line_and_link(
            await client.call_tool("read_media_file", {"path": str(files / "meeting.wav")})
        )
        segment = await client.call_tool(
            "read_artifact", {"uri": str(link.uri), "start_seconds": 40, "duration_seconds": 30}
        )
    # The line states the speech map beside the duration (where the voice-activity detector heard speech).
    assert f"meeting.wav (audio/wav, 2.3 MiB, {WAV_SECONDS}.0 s, " in line
    assert re.search(rf"s, (speech [0-9:, -]+|no speech in) ?of 1:15\) stored as {link.uri}", line), line
    assert "hear the first 30 s with read_artifact(uri, start_seconds=0, duration_seconds=30)" in line
    assert not segment.is_error, segment.content
    (audio,) = [block for block in segment.content if isinstance(block, AudioContent)]
    assert audio.mime_type == "audio/wav"
    with wave.open(io.BytesIO(base64.b64decode(audio.data)), "rb") as reader:
        channels, rate, width = reader.getnchannels(), reader.getframerate(), reader.getsampwidth()
        frames = reader.getnframes()
        pcm = reader.readframes(frames)
    assert (channels, rate, width) == (1, RATE, 2)
    assert abs(frames - 30 * RATE) <= 1
    with wave.open(str(files / "meeting.wav"), "rb") as source:
        source.setpos(40 * RATE)
        expected = source.readframes(frames)
    assert pcm == expected


async def test_without_the_read_tool_the_line_names_the_page_resource_and_reading_it_gives_page_one(
    files: Path, data_dir: Path, offload_config: Path
) -> None:
    params = proxy_params(
        data_dir, filesystem_upstream(files), "--offload-config", str(offload_config), "--no-read-tool"
    )
    async with Client(params) as client:
        line, link = line_and_link(
            await client.call_tool("read_media_file", {"path": str(files / "report.pdf")})
        )
        page_uri = f"{link.uri}/pages/1.txt"
        read = await client.read_resource(page_uri)
    assert f"read page 1 with resources/read: {page_uri}" in line
    assert link.description is not None
    assert link.description.endswith(f"read page 1 with resources/read: {page_uri}")
    assert "read_artifact" not in line + link.description
    (contents,) = read.contents
    assert isinstance(contents, TextResourceContents)
    assert [n for n in range(1, PDF_PAGES + 1) if media.marker(n) in contents.text] == [1]


async def offloaded_resource(
    offloader: Offloader, uri: str, mime_type: str, data: bytes
) -> tuple[str, dict[str, Any]]:
    """The line and the link the offloader gives for one embedded resource blob."""
    block = {"type": "resource", "resource": {"uri": uri, "mimeType": mime_type, "blob": b64(data)}}
    out = await offloader.tool_result(
        tool="read_media_file", arguments=None, output_schema=None, result={"content": [block]}
    )
    assert out is not None
    (link,) = links(out)
    return text_of(out), link


async def test_a_renamed_read_tool_is_the_one_the_pdf_line_and_link_name(
    rig: Rig, offload_config: Path
) -> None:
    # The proxy renames its read tool when the upstream has one of the same name.
    offloader = rig.offloader(config=offload_config, read_tool_name="blobstore_read_artifact")
    line, link = await offloaded_resource(
        offloader, "file:///docs/report.pdf", "application/pdf", media.text_pdf(3)
    )
    hint = 'read page 1 with blobstore_read_artifact(uri, pages="1")'
    assert "3 pages, text layer" in line
    assert hint in line
    assert link["description"].endswith(hint)
    assert "read_artifact(" not in line.replace("blobstore_read_artifact(", "")


async def test_an_offloaded_videos_line_names_its_duration_and_the_keyframes_call(
    rig: Rig, offload_config: Path
) -> None:
    # server-filesystem labels an MP4 application/octet-stream: the store types it by its name and bytes.
    line, link = await offloaded_resource(
        rig.offloader(config=offload_config),
        "file:///films/clip.mp4",
        "application/octet-stream",
        media.numbered_video(),
    )
    assert link["mimeType"] == "video/mp4"
    assert "clip.mp4 (video/mp4, " in line
    assert "320x240 px, 6.0 s) stored as" in line
    assert (
        "; see it with read_artifact(uri, frames=6); hear it with read_artifact(uri, start_seconds=0)" in line
    )

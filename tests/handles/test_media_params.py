"""Typed media parameters and results of embedded tools (``mcp_resources.embed``: Image, Audio, Video,
Document, MediaLimits): their schemas, the checks before a tool runs, facts probed only when read, and results
stored and answered by the store's rules. Through the official client on an in-memory connection; the
example server's tests run the same over stdio and streamable HTTP (tests/media)."""

from __future__ import annotations

import base64
import contextlib
import io
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any

import jsonschema
import jsonschema_rs
import pytest
from jsonschema.validators import validator_for
from mcp import Client
from mcp.server import MCPServer
from mcp.types import Tool
from PIL import Image as Pillow

from blobstore.config import Settings
from blobstore.runtime import open_service
from blobstore.service import ArtifactService
from blobstore.views.engine import views_for
from mcp_resources.embed import Audio, Document, FactsNotRead, Image, MediaLimits, Video, embed_store
from tests.handles.conftest import CALLER, put
from tests.views import media


def png(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Pillow.new("RGB", (width, height), (10, 120, 200)).save(out, "PNG")
    return out.getvalue()


def jpeg(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Pillow.new("RGB", (width, height), (200, 120, 10)).save(out, "JPEG")
    return out.getvalue()


def data_url(data: bytes, claimed: str = "image/png") -> str:
    return f"data:{claimed};base64,{base64.b64encode(data).decode()}"


SmallPng = Annotated[Image, MediaLimits(max_bytes="20KB", formats=("png",), max_pixels=1_000_000)]


class Calls:
    def __init__(self) -> None:
        self.made: list[str] = []


def tool_server(service: ArtifactService, calls: Calls) -> MCPServer:
    mcp = MCPServer("media")
    embed_store(mcp, service, caller=CALLER, tools=True)

    @mcp.tool()
    async def measure(image: SmallPng, question: str = "") -> dict[str, Any]:
        """The image's facts."""
        calls.made.append("measure")
        await image.facts()
        return {"format": image.format, "width": image.width, "height": image.height, "mime": image.mime_type}

    @mcp.tool()
    async def lazy(image: Image, look: bool = False) -> dict[str, Any]:
        """Facts only when asked."""
        calls.made.append("lazy")
        out: dict[str, Any] = {"format": image.format, "size": image.size, "uri": image.uri}
        try:
            out["width"] = image.width
        except FactsNotRead:
            out["width"] = None
        if look:
            facts = await image.facts()
            out["width"] = facts["width"]
        return out

    @mcp.tool()
    async def hear(audio: Annotated[Audio, MediaLimits(max_seconds=2)]) -> str:
        """Duration."""
        calls.made.append("hear")
        return f"{audio.duration:.1f} s at {audio.sample_rate} Hz, {audio.format}"

    @mcp.tool()
    async def watch(video: Video) -> str:
        """Facts of a video."""
        await video.facts()
        return f"{video.width}x{video.height}, {video.fps} fps, {video.duration:.1f} s"

    @mcp.tool()
    async def count_pages(document: Annotated[Document, MediaLimits(max_pages=5)]) -> int:
        """Pages."""
        calls.made.append("count_pages")
        return document.pages

    @mcp.tool()
    async def several(images: list[Image], extra: Document | None = None) -> list[str]:
        """Formats of several images, and a PDF's pages if one is given."""
        calls.made.append("several")
        pages = [f"{(await extra.facts())['pages']} pages"] if extra is not None else []
        return [image.format or "" for image in images] + pages

    @mcp.tool()
    async def draw(width: int, height: int) -> Image:
        """An image."""
        return Image(data=png(width, height), format="png")

    @mcp.tool()
    async def caption(width: int) -> list[str | Image]:
        """Text beside an image."""
        return ["A drawing:", Image(data=png(width, 40))]

    @mcp.tool()
    async def echo(image: Image) -> Image:
        """The image it was given."""
        return image

    @mcp.tool()
    async def record(seconds: float) -> Audio:
        """A tone."""
        return Audio(data=media.tone("wav", seconds, channels=1), format="wav")

    @mcp.tool()
    async def speak() -> Audio:
        """Two voices of Debian's ALSA sounds, two seconds apart."""
        return Audio(data=media.spoken_wav(["Front_Center", "Front_Left"], gap=2.0), name="voices.wav")

    @mcp.tool()
    async def film() -> Video:
        """A clip."""
        return Video(data=media.numbered_video(1), name="clip.mp4")

    @mcp.tool()
    async def report() -> Document:
        """A PDF."""
        return Document(data=media.text_pdf(2), name="report.pdf")

    return mcp


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[ArtifactService]:
    async with open_service(Settings(data_dir=tmp_path / "data", media_max_bytes=3_000_000)) as service:
        yield service


@contextlib.asynccontextmanager
async def served(store: ArtifactService) -> AsyncIterator[tuple[Client, Calls]]:
    """The official client on an in-memory connection to the tool server (a client is entered and left in
    one task, so not in a fixture)."""
    calls = Calls()
    async with Client(tool_server(store, calls)) as connected:
        yield connected, calls


async def listed(client: Client) -> dict[str, Tool]:
    return {tool.name: tool for tool in (await client.list_tools()).tools}


async def error_of(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.content
    assert result.structured_content is not None
    return dict(result.structured_content["error"])


# -- schemas -----------------------------------------------------------------------------------------------


async def test_a_typed_parameters_schema_names_its_type_limits_and_forms(store: ArtifactService) -> None:
    async with served(store) as (connected, _calls):
        tools = await listed(connected)
        image = tools["measure"].input_schema["properties"]["image"]
        assert image["contentMediaType"] == "image/png"
        assert image["x-blobstore-media"] == {
            "type": "image",
            "formats": ["png"],
            "mimeTypes": ["image/png"],
            "maxSize": 20_000,
            "maxSizeText": "20 KB",
            "maxPixels": 1_000_000,
        }
        assert image["x-blobstore-file"] is True
        assert [branch.get("type") for branch in image["anyOf"]] == ["string", "object", "object"]
        assert "https:// URL" in image["anyOf"][0]["description"]
        # The settings give the limits an annotation leaves out.
        lazy = tools["lazy"].input_schema["properties"]["image"]
        assert lazy["contentMediaType"] == "image/*"
        assert lazy["x-blobstore-media"]["maxSize"] == 3_000_000
        assert lazy["x-blobstore-media"]["formats"] == ["png", "jpeg", "gif", "webp"]
        hear = tools["hear"].input_schema["properties"]["audio"]
        assert (hear["contentMediaType"], hear["x-blobstore-media"]["maxSeconds"]) == ("audio/*", 2)
        assert (
            tools["count_pages"].input_schema["properties"]["document"]["contentMediaType"]
            == "application/pdf"
        )
        description = tools["measure"].description or ""
        assert description.startswith("The image's facts.")
        assert "image: an image (png, at most 20 KB, 1,000,000 pixels)" in description
        assert tools["measure"].meta is not None
        assert tools["measure"].meta["openai/fileParams"] == ["image"]


async def test_a_typed_results_output_schema_says_it_is_a_stored_artifact(store: ArtifactService) -> None:
    async with served(store) as (connected, _calls):
        tools = await listed(connected)
        drawn = tools["draw"].output_schema
        assert drawn is not None
        result = drawn["properties"]["result"]
        assert result["x-blobstore-media"] == {"type": "image", "result": True}
        assert set(result["required"]) == {"type", "uri", "mimeType", "size", "sha256"}
        both = tools["caption"].output_schema
        assert both is not None
        assert both["properties"]["result"]["type"] == "array"


async def test_every_schema_is_valid_json_schema_2020_12_for_the_sdk_and_a_second_validator(
    store: ArtifactService,
) -> None:
    async with served(store) as (connected, _calls):
        samples = [
            data_url(png(4, 4)),
            base64.b64encode(png(4, 4)).decode(),
            "blobstore://artifacts/a_0123456789abcdefghijklmn",
            "https://files.example.com/a.png",
            {"upload_id": "u_1"},
            {"download_url": "https://files.example.com/f", "file_id": "file_1"},
        ]
        for tool in (await listed(connected)).values():
            for schema in (tool.input_schema, tool.output_schema):
                if schema is None:
                    continue
                # What the SDK's client does with a tool's schema: the validator its $schema names (2020-12
                # when none), checked against the metaschema.
                cls = validator_for(schema, default=jsonschema.Draft202012Validator)
                assert cls is jsonschema.Draft202012Validator
                cls.check_schema(schema)
                assert jsonschema_rs.meta.is_valid(schema)
                jsonschema_rs.validator_for(schema)
            properties = tool.input_schema.get("properties", {})
            for name, node in properties.items():
                if "x-blobstore-media" not in node:
                    continue
                one = {"type": "object", "properties": {name: node}}
                for value in samples:
                    jsonschema.Draft202012Validator(one).validate({name: value})
                    assert jsonschema_rs.validator_for(one).is_valid({name: value})


# -- checks before the tool runs ---------------------------------------------------------------------------


async def test_each_inline_form_reaches_the_tool_as_a_typed_image(store: ArtifactService) -> None:
    async with served(store) as (connected, _calls):
        picture = png(300, 200)
        for value in (data_url(picture), base64.b64encode(picture).decode(), data_url(picture, "text/plain")):
            result = await connected.call_tool("measure", {"image": value})
            assert result.structured_content == {
                "format": "png",
                "width": 300,
                "height": 200,
                "mime": "image/png",
            }


async def test_a_wrong_format_is_a_tool_error_naming_the_formats_and_the_tool_is_not_called(
    store: ArtifactService,
) -> None:
    async with served(store) as (connected, calls):
        # Claimed PNG, but the bytes are a JPEG: the bytes decide.
        refused = await error_of(connected, "measure", {"image": data_url(jpeg(40, 30), "image/png")})
        assert refused["code"] == "unsupported_media"
        assert refused["formats"] == ["png"]
        assert refused["format"] == "jpeg"
        assert "takes an image as png" in refused["message"]
        unknown = await error_of(connected, "measure", {"image": base64.b64encode(b"plain text").decode()})
        assert unknown["format"] is None
        assert calls.made == []


async def test_too_large_is_limit_exceeded_naming_the_limit(store: ArtifactService) -> None:
    async with served(store) as (connected, calls):
        noisy = Pillow.frombytes("RGB", (120, 120), random.Random(1).randbytes(120 * 120 * 3))
        out = io.BytesIO()
        noisy.save(out, "PNG")
        big = out.getvalue()
        assert len(big) > 20_000
        refused = await error_of(connected, "measure", {"image": data_url(big)})
        assert refused["code"] == "limit_exceeded"
        assert refused["maxBytes"] == 20_000
        assert "20 KB" in refused["message"]
        wide = await error_of(connected, "measure", {"image": data_url(png(2000, 600))})
        assert (wide["code"], wide["maxPixels"]) == ("limit_exceeded", 1_000_000)
        long = await error_of(connected, "hear", {"audio": data_url(media.tone("wav", 3, channels=1))})
        assert (long["code"], long["maxSeconds"]) == ("limit_exceeded", 2)
        pages = await error_of(connected, "count_pages", {"document": data_url(media.text_pdf(6))})
        assert (pages["code"], pages["maxPages"]) == ("limit_exceeded", 5)
        assert calls.made == []


async def test_media_that_does_not_decode_is_media_invalid_before_the_call(store: ArtifactService) -> None:
    async with served(store) as (connected, calls):
        broken = png(200, 200)
        refused = await error_of(connected, "measure", {"image": data_url(broken[: len(broken) - 30])})
        assert refused["code"] == "media_invalid"
        bad_pdf = await error_of(connected, "count_pages", {"document": data_url(b"%PDF-1.7\n" + b"x" * 300)})
        assert bad_pdf["code"] == "media_invalid"
        assert calls.made == []


async def test_an_artifact_and_an_upload_id_are_typed_arguments(store: ArtifactService) -> None:
    async with served(store) as (connected, calls):
        artifact = await put(store, png(120, 90), "shot.bin", "application/octet-stream")
        by_uri = await connected.call_tool("measure", {"image": artifact.uri})
        assert by_uri.structured_content == {"format": "png", "width": 120, "height": 90, "mime": "image/png"}
        begun = await connected.call_tool("upload_begin", {"name": "up.png", "size": len(png(50, 60))})
        assert begun.structured_content is not None
        upload_id = begun.structured_content["upload_id"]
        await connected.call_tool(
            "upload_chunk",
            {"upload_id": upload_id, "index": 0, "data": base64.b64encode(png(50, 60)).decode()},
        )
        await connected.call_tool("upload_commit", {"upload_id": upload_id})
        by_upload = await connected.call_tool("measure", {"image": {"upload_id": upload_id}})
        assert by_upload.structured_content == {
            "format": "png",
            "width": 50,
            "height": 60,
            "mime": "image/png",
        }
        missing = await error_of(
            connected, "measure", {"image": "blobstore://artifacts/a_nothing_here_at_all_xx"}
        )
        assert missing["code"] == "not_found"
        assert calls.made == ["measure", "measure"]


async def test_facts_are_probed_only_when_read(store: ArtifactService) -> None:
    async with served(store) as (connected, _calls):
        runner = views_for(store).runner
        before = runner.started
        unread = await connected.call_tool("lazy", {"image": data_url(png(30, 20))})
        assert unread.structured_content == {
            "format": "png",
            "size": len(png(30, 20)),
            "uri": None,
            "width": None,
        }
        assert runner.started == before
        artifact = await put(store, png(31, 21), "a.png", "image/png")
        for _ in range(2):
            read = await connected.call_tool("lazy", {"image": artifact.uri, "look": True})
            assert read.structured_content == {
                "format": "png",
                "size": artifact.size,
                "uri": artifact.uri,
                "width": 31,
            }
        # An artifact's facts are probed once and cached by its content.
        assert runner.started == before + 1


async def test_a_refusal_of_facts_read_in_the_tool_is_the_calls_error(store: ArtifactService) -> None:
    async with served(store) as (connected, calls):
        broken = png(200, 200)
        lazy = await error_of(connected, "lazy", {"image": data_url(broken[:-30]), "look": True})
        assert lazy["code"] == "media_invalid"
        assert calls.made == ["lazy"]


# -- results -----------------------------------------------------------------------------------------------


async def test_an_image_result_is_stored_and_answered_inline_or_as_a_link(store: ArtifactService) -> None:
    async with served(store) as (connected, _calls):
        small = await connected.call_tool("draw", {"width": 64, "height": 32})
        assert [block.type for block in small.content] == ["text", "image"]
        assert small.structured_content is not None
        stored = small.structured_content["result"]
        assert (stored["type"], stored["width"], stored["height"], stored["mimeType"]) == (
            "image",
            64,
            32,
            "image/png",
        )
        artifact, _ = await store.open_artifact(CALLER, stored["uri"].rsplit("/", 1)[1])
        assert artifact.name == "draw.png"
        assert artifact.size == stored["size"]
        read = await connected.read_resource(stored["uri"])
        assert base64.b64decode(read.contents[0].blob) == png(64, 32)  # type: ignore[union-attr]
        # Larger than the long-edge budget: downscaled inline, the original linked in the summary.
        wide = await connected.call_tool("draw", {"width": 2400, "height": 600})
        assert [block.type for block in wide.content] == ["text", "image"]
        assert "1024x256 px inline" in wide.content[0].text  # type: ignore[union-attr]


async def test_a_result_beside_text_keeps_the_tools_order(store: ArtifactService) -> None:
    async with served(store) as (connected, _calls):
        answer = await connected.call_tool("caption", {"width": 80})
        assert [block.type for block in answer.content] == ["text", "text", "image"]
        assert answer.content[0].text == "A drawing:"  # type: ignore[union-attr]
        assert answer.structured_content is not None
        text, image = answer.structured_content["result"]
        assert text == "A drawing:"
        assert image["uri"].startswith("blobstore://artifacts/")


async def test_an_argument_returned_as_it_is_answers_with_its_own_artifact(store: ArtifactService) -> None:
    async with served(store) as (connected, _calls):
        artifact = await put(store, png(20, 20), "in.png", "image/png")
        answer = await connected.call_tool("echo", {"image": artifact.uri})
        assert answer.structured_content is not None
        assert answer.structured_content["result"]["uri"] == artifact.uri


async def test_audio_video_and_pdf_results_follow_the_stores_rules(store: ArtifactService) -> None:
    async with served(store) as (connected, _calls):
        short = await connected.call_tool("record", {"seconds": 0.5})
        # The summary, what was said (a tone: whatever the speech engine makes of it), the sound.
        assert [block.type for block in short.content] == ["text", "text", "audio"]
        assert short.content[1].text.startswith("Its transcript (")  # type: ignore[union-attr]
        assert short.structured_content is not None
        assert short.structured_content["result"]["durationSeconds"] == pytest.approx(0.5, abs=0.01)
        long = await connected.call_tool("record", {"seconds": 20})
        assert [block.type for block in long.content] == ["text", "text", "resource_link"]
        assert "start_seconds=0" in long.content[0].text  # type: ignore[union-attr]
        clip = await connected.call_tool("film", {})
        assert [block.type for block in clip.content] == ["text", "resource_link"]
        assert clip.structured_content is not None
        assert clip.structured_content["result"]["mimeType"] == "video/mp4"
        pdf = await connected.call_tool("report", {})
        assert [block.type for block in pdf.content] == ["text", "resource_link"]
        assert 'pages="1"' in pdf.content[0].text  # type: ignore[union-attr]
        assert pdf.structured_content is not None
        assert pdf.structured_content["result"]["pages"] == 2


async def test_an_audio_result_carries_what_was_said_before_the_sound(store: ArtifactService) -> None:
    async with served(store) as (connected, _calls):
        result = await connected.call_tool("speak", {})
    assert not result.is_error, result.content
    assert [block.type for block in result.content] == ["text", "text", "audio"]
    head, said = result.content[0].text, result.content[1].text  # type: ignore[union-attr]
    assert head.startswith("voices.wav")
    title, *lines = said.splitlines()
    assert title.startswith("Its transcript (")
    assert "2 segments" in title
    # One timed line a voice, in order (the words as the speech engine heard them: its last word right).
    assert [line.split()[-1] for line in lines if line.startswith("[")] == ["center", "left"]
    # Neither a video's nor a PDF's result is given a transcript.
    async with served(store) as (connected, _calls):
        clip = await connected.call_tool("film", {})
    assert not any("transcript" in getattr(block, "text", "") for block in clip.content)


def test_a_tool_makes_media_from_bytes_or_a_file_by_what_the_bytes_are(tmp_path: Path) -> None:
    made = Image(data=jpeg(10, 10), format="png")
    assert (made.format, made.mime_type, made.size) == ("jpeg", "image/jpeg", len(jpeg(10, 10)))
    path = tmp_path / "tone.flac"
    path.write_bytes(media.tone("flac", 0.2))
    sound = Audio(path=path)
    assert (sound.format, sound.name) == ("flac", "tone.flac")
    with pytest.raises(ValueError, match="not an image"):
        Image(data=media.tone("wav", 0.1))
    with pytest.raises(ValueError, match="one of them"):
        Image()
    with pytest.raises(ValueError, match="unknown media format"):
        MediaLimits(formats=("bmp",)).extension()


async def test_typed_media_in_a_list_and_an_optional_one(store: ArtifactService) -> None:
    async with served(store) as (connected, calls):
        tools = await listed(connected)
        items = tools["several"].input_schema["properties"]["images"]["items"]
        assert items["x-blobstore-media"]["type"] == "image"
        both = await connected.call_tool(
            "several",
            {"images": [data_url(png(5, 5)), data_url(jpeg(6, 6))], "extra": data_url(media.text_pdf(2))},
        )
        assert both.structured_content == {"result": ["png", "jpeg", "2 pages"]}
        without = await connected.call_tool("several", {"images": [data_url(png(5, 5))], "extra": None})
        assert without.structured_content == {"result": ["png"]}
        refused = await error_of(
            connected, "several", {"images": [data_url(png(5, 5)), data_url(media.text_pdf(1))]}
        )
        assert (refused["code"], refused["argument"]) == ("unsupported_media", "images[1]")
        assert calls.made == ["several", "several"]


@pytest.mark.parametrize(
    ("written", "size", "text"),
    [
        ("10MB", 10_000_000, "10 MB"),
        ("10 mib", 10_485_760, "10 MiB"),
        ("1.5GB", 1_500_000_000, "1.5 GB"),
        (2048, 2048, "2.0 KiB"),
    ],
)
def test_a_size_limit_as_written(written: str | int, size: int, text: str) -> None:
    extension = MediaLimits(max_bytes=written).extension()
    assert (extension["maxSize"], extension["maxSizeText"]) == (size, text)


@pytest.mark.parametrize("written", ["ten megabytes", "0", "-1MB", ""])
def test_a_size_limit_that_is_not_one_is_refused_where_the_tool_is_declared(written: str) -> None:
    with pytest.raises(ValueError, match="size"):
        MediaLimits(max_bytes=written).extension()

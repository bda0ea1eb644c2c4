"""The format a file's bytes prove (``blobstore.media_formats``) and the facts a typed media argument is
checked against (``MediaViews.probe``, in a decoder worker), on media made by real encoders."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from pathlib import Path

import av
import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image

from blobstore.config import Settings
from blobstore.errors import MediaInvalid, ViewTooLarge
from blobstore.media_formats import FORMATS, canonical_format, formats_of, sniff_format
from blobstore.runtime import open_service
from blobstore.service import ArtifactService
from blobstore.views.engine import views_for
from tests.mcp.conftest import CALLER, put
from tests.proxy.test_hostile_media import png_bomb
from tests.views import media


def image(kind: str, size: tuple[int, int] = (64, 48)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, (200, 30, 30)).save(out, format=kind)
    return out.getvalue()


def movie(container: str) -> bytes:
    out = io.BytesIO()
    with av.open(out, "w", format=container) as box:
        codec = "libvpx" if container == "webm" else "libx264"
        stream = box.add_stream(codec, rate=10)
        assert isinstance(stream, av.VideoStream)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for number in range(10):
            frame = av.VideoFrame.from_image(Image.new("RGB", (64, 48), (number * 20,) * 3))  # type: ignore[no-untyped-call]
            frame.pts = number
            for packet in stream.encode(frame):
                box.mux(packet)
        for packet in stream.encode(None):
            box.mux(packet)
    return out.getvalue()


SAMPLES = {
    "png": lambda: image("PNG"),
    "jpeg": lambda: image("JPEG"),
    "gif": lambda: image("GIF"),
    "webp": lambda: image("WEBP"),
    "wav": lambda: media.tone("wav", 0.5),
    "flac": lambda: media.tone("flac", 0.5),
    "ogg": lambda: media.tone("ogg", 0.5),
    "mp3": lambda: media.tone("mp3", 0.5),
    "mp4": lambda: movie("mp4"),
    "mov": lambda: movie("mov"),
    "webm": lambda: movie("webm"),
    "pdf": lambda: media.text_pdf(2),
}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_each_format_is_told_by_its_first_bytes(name: str) -> None:
    assert sniff_format(SAMPLES[name]()[:4096]) == name


def test_an_mp3_without_an_id3_tag_is_told_by_its_frame_header() -> None:
    data = media.tone("mp3", 0.5)
    if data.startswith(b"ID3"):
        size = int.from_bytes(bytes(b & 0x7F for b in data[6:10]), "big")
        data = data[10 + size :]
    assert sniff_format(data[:16]) == "mp3"


@pytest.mark.parametrize(
    "head", [b"", b"hello world", b"PK\x03\x04zip", b"\x00\x00\x00\x18ftypM4A ", b"\xff\xfb\x00\x00"]
)
def test_other_bytes_are_no_format(head: bytes) -> None:
    assert sniff_format(head) is None


@given(st.binary(max_size=64))
def test_sniffing_never_fails(head: bytes) -> None:
    found = sniff_format(head)
    assert found is None or found in FORMATS


def test_format_names_and_aliases() -> None:
    assert canonical_format("JPG") == canonical_format(".jpeg") == "jpeg"
    assert formats_of("audio") == ("mp3", "wav", "ogg", "flac")
    with pytest.raises(ValueError, match="unknown media format"):
        canonical_format("bmp")


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[ArtifactService]:
    async with open_service(Settings(data_dir=tmp_path / "data")) as opened:
        yield opened


async def test_probes_tell_each_kinds_facts_and_cache_an_artifacts(service: ArtifactService) -> None:
    views = views_for(service)
    png = await put(service, image("PNG", (300, 200)), "a.png", "image/png")
    source = await views.open(CALLER, png.id)
    started = views.runner.started
    first = await views.probe("image", source=source)
    again = await views.probe("image", source=source)
    assert first == again == {"format": "png", "width": 300, "height": 200, "mode": "RGB", "frames": 1}
    assert views.runner.started == started + 1
    wav = await put(service, media.tone("wav", 1.5), "a.wav", "audio/wav")
    heard = await views.probe("audio", source=await views.open(CALLER, wav.id))
    assert heard["duration_seconds"] == pytest.approx(1.5, abs=0.05)
    assert heard["sample_rate"] == 44_100
    clip = await put(service, media.numbered_video(2), "a.mp4", "video/mp4")
    seen = await views.probe("video", source=await views.open(CALLER, clip.id))
    assert (seen["width"], seen["height"], seen["frame_rate"]) == (320, 240, 10.0)
    pdf = await put(service, media.text_pdf(3), "a.pdf", "application/pdf")
    read = await views.probe("document", source=await views.open(CALLER, pdf.id))
    assert (read["pages"], read["text_layer"]) == (3, True)


async def test_a_file_is_probed_by_path_without_a_cache(service: ArtifactService, tmp_path: Path) -> None:
    path = tmp_path / "x.jpg"
    path.write_bytes(image("JPEG", (640, 480)))
    views = views_for(service)
    started = views.runner.started
    for _ in range(2):
        assert (await views.probe("image", path=str(path)))["width"] == 640
    assert views.runner.started == started + 2


def truncated(data: bytes) -> bytes:
    return data[: len(data) // 2]


@pytest.mark.parametrize(
    ("kind", "data"),
    [
        ("image", truncated(image("PNG", (200, 200)))),
        ("image", image("JPEG", (400, 300))[:600]),
        ("image", b"\x89PNG\r\n\x1a\n" + b"\x00" * 64),
        ("audio", b"RIFF\x24\x00\x00\x00WAVEfmt " + b"\xff" * 40),
        ("video", truncated(media.numbered_video(2))[:2000]),
        ("document", b"%PDF-1.7\n" + b"garbage " * 100),
    ],
)
async def test_bytes_that_do_not_decode_are_media_invalid(
    service: ArtifactService, tmp_path: Path, kind: str, data: bytes
) -> None:
    path = tmp_path / "bad"
    path.write_bytes(data)
    with pytest.raises(MediaInvalid):
        await views_for(service).probe(kind, path=str(path))


async def test_an_image_over_the_decoders_pixel_bound_is_refused_before_decoding(
    service: ArtifactService, tmp_path: Path
) -> None:
    path = tmp_path / "huge.png"
    path.write_bytes(png_bomb(20_000))
    with pytest.raises(ViewTooLarge):
        await views_for(service).probe("image", path=str(path))

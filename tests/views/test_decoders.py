"""The decoders and the worker's job protocol in this process, on the same real media (the engine tests run
them in worker processes)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import av
import pytest

from blobstore.errors import MediaInvalid, UnsupportedMedia, ViewTooLarge
from blobstore.views import jobs
from blobstore.views.kinds import frames, pages, regions, segments
from blobstore.views.ocr_text import ocr_text
from blobstore.views.worker import run_job
from tests.fixtures.png_chunks import rebuilt, tiny_image_png
from tests.views import media


def _file(tmp_path: Path, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def test_pdf_text_image_and_facts(tmp_path: Path) -> None:
    path = _file(tmp_path, "r.pdf", media.text_pdf(3))
    assert jobs.pdf_facts(path).meta["pages"] == 3
    parts = pages.pdf_pages_text(path, [3, 1]).parts
    assert [meta["page"] for meta, _ in parts] == [3, 1]
    assert media.marker(3).encode() in parts[0][1]
    image = pages.pdf_page_png(path, 2, 300)
    assert max(image.meta["width"], image.meta["height"]) == 300
    with pytest.raises(MediaInvalid, match="past"):
        pages.pdf_pages_text(path, [4])
    with pytest.raises(MediaInvalid, match="past"):
        pages.pdf_page_png(path, 4, 300)


def test_ocr_reads_a_scanned_page(tmp_path: Path) -> None:
    path = _file(tmp_path, "s.pdf", media.scanned_pdf(["HELLO OCR 2026"]))
    ((meta, data),) = pages.pdf_page_ocr(path, 1).parts
    assert meta["ocr"] is True
    document = json.loads(data)
    assert ocr_text(document, 0.9).text == "HELLO OCR 2026"
    # Boxes are in the pixels of the page rendered at 300 dpi (the scan's 1700x2200 at 200 dpi).
    assert document["width"] == 2550
    assert abs(document["height"] - 3300) <= 1
    (line,) = document["lines"]
    # The text was drawn at (150, 300) of the 200-dpi scan: (225, 450) at 300 dpi, its ink a little lower.
    assert 215 < line["box"][0] < 260
    assert 440 < line["box"][1] < 500
    with pytest.raises(MediaInvalid, match="past"):
        pages.pdf_page_ocr(path, 2)


def test_audio_and_video(tmp_path: Path) -> None:
    wav = _file(tmp_path, "p.wav", media.pattern_wav(3.0))
    assert jobs.audio_facts(wav).meta["duration_seconds"] == 3.0
    segment = segments.audio_segment(wav, 2.5, 5.0)
    assert segment.meta["end_seconds"] == 3.0  # clipped to the end
    with pytest.raises(MediaInvalid, match="past the end"):
        segments.audio_segment(wav, 3.0, 1.0)
    clip = _file(tmp_path, "c.mp4", media.numbered_video(2))
    assert jobs.video_facts(clip).meta["frame_rate"] == 10.0
    assert frames.video_frames(clip, 2, 100, "frames").meta["times"] == [0.0, 1.0]
    ((sheet_meta, sheet),) = frames.video_frames(clip, 2, 100, "sheet").parts
    assert sheet_meta["columns"] == 2
    assert sheet.startswith(b"\xff\xd8")
    with pytest.raises(UnsupportedMedia):
        jobs.video_facts(wav)
    with pytest.raises(UnsupportedMedia):
        jobs.audio_facts(clip)
    with pytest.raises(MediaInvalid):
        jobs.audio_facts(_file(tmp_path, "x.wav", b"RIFF\0\0\0\0WAVEjunk"))


@pytest.mark.parametrize("kind", ["mp3", "flac"])
def test_a_file_cut_short_is_as_long_as_what_decodes(tmp_path: Path, kind: str) -> None:
    # The first quarter of a 3 s file: its header (an MP3's Info tag, FLAC's STREAMINFO) still says 3 s.
    whole = media.tone(kind, 3.0)
    path = _file(tmp_path, f"cut.{kind}", whole[: len(whole) // 4])
    decodable = media.decodable_seconds(path)
    assert decodable < 2.0
    facts = jobs.audio_facts(path).meta
    assert facts["duration_seconds"] == pytest.approx(decodable, abs=0.03)
    # A segment anywhere in what decodes ends where decoding does, even where the file's seek table
    # points past its end (FLAC's) or its last packet is cut in two.
    for fraction in (0.2, 0.5, 0.8):
        segment = segments.audio_segment(path, round(decodable * fraction, 3), 5.0)
        assert segment.meta["duration_seconds"] == facts["duration_seconds"]
        assert segment.meta["end_seconds"] == pytest.approx(decodable, abs=0.03)
    with pytest.raises(
        MediaInvalid, match=rf"start 2 s is past the end \({round(facts['duration_seconds'], 2):g} s\)"
    ):
        segments.audio_segment(path, 2.0, 1.0)
    # The whole file keeps its header's length, which its end bears out.
    assert jobs.audio_facts(_file(tmp_path, f"whole.{kind}", whole)).meta["duration_seconds"] == 3.0


def test_a_header_claiming_ten_hours_over_one_second_is_measured(tmp_path: Path) -> None:
    path = _file(tmp_path, "claims.mp3", media.claiming_mp3(1.0, 36_000.0))
    with av.open(path) as container:  # what FFmpeg believes
        assert (container.duration or 0) / 1_000_000 == pytest.approx(36_000, rel=0.01)
    facts = jobs.audio_facts(path).meta
    assert facts["duration_seconds"] == pytest.approx(media.decodable_seconds(path), abs=0.03)
    assert segments.audio_segment(path, 0.5, 30.0).meta["end_seconds"] == pytest.approx(1.0, abs=0.03)
    with pytest.raises(MediaInvalid, match="past the end"):
        segments.audio_segment(path, 3600.0, 30.0)


def test_images(tmp_path: Path) -> None:
    png = _file(tmp_path, "i.png", media.png_bytes(300, 200))
    whole = regions.image_view(png, None, 150)
    assert (whole.meta["width"], whole.meta["height"]) == (150, 100)
    edge = regions.image_view(png, [250, 150, 100, 100], 1024)
    assert edge.meta["region"] == [250, 150, 50, 50]  # cut at the image's border
    with pytest.raises(MediaInvalid, match="outside"):
        regions.image_view(png, [300, 0, 10, 10], 100)
    with pytest.raises(MediaInvalid):
        regions.image_view(_file(tmp_path, "n.png", b"\x89PNG\r\n\x1a\nnot really"), None, 100)
    from PIL import Image

    out = io.BytesIO()
    Image.new("1", (10_000, 9_000)).save(out, format="PNG")
    with pytest.raises(ViewTooLarge):
        regions.image_view(_file(tmp_path, "b.png", out.getvalue()), None, 100)


def test_a_png_is_decoded_as_browsers_decode_it(tmp_path: Path) -> None:
    # The tiny image's iCCP chunk fails its CRC: browsers drop that chunk and show the pixels.
    tiny = _file(tmp_path, "tiny.png", tiny_image_png())
    ((meta, data),) = regions.image_view(tiny, [5, 0, 10, 20], 100).parts
    assert (meta["source_width"], meta["source_height"], meta["width"], meta["height"]) == (20, 20, 10, 20)
    assert data.startswith(b"\x89PNG")
    # A critical chunk whose CRC fails is refused, by name.
    broken = _file(tmp_path, "broken.png", rebuilt(tiny_image_png(), fix=True, corrupt=b"IDAT"))
    with pytest.raises(MediaInvalid, match=r"the PNG's critical IDAT chunk \(at byte \d+\) fails its CRC"):
        regions.image_view(broken, None, 100)


@pytest.mark.parametrize(
    ("mode", "image_format"), [("CMYK", "JPEG"), ("LAB", "TIFF"), ("F", "TIFF"), ("I", "TIFF")]
)
def test_images_in_modes_png_cannot_hold_are_shown_not_refused(
    tmp_path: Path, mode: str, image_format: str
) -> None:
    # A print shop's CMYK JPEG or a scientific float TIFF is a valid image: its view is converted to RGB.
    from PIL import Image

    image = Image.new("RGB", (64, 48), (200, 30, 30)).convert(mode) if mode in {"CMYK", "LAB"} else None
    image = image if image is not None else Image.new(mode, (64, 48), 100)
    out = io.BytesIO()
    image.save(out, format=image_format)
    view = regions.image_view(
        _file(tmp_path, f"i.{image_format.lower()}", out.getvalue()), [0, 0, 32, 32], 16
    )
    ((meta, data),) = view.parts
    assert (meta["width"], meta["height"]) == (16, 16)
    with Image.open(io.BytesIO(data)) as shown:
        assert (shown.format, shown.mode) == ("PNG", "RGB")


def test_the_worker_answers_every_job_with_a_header_and_its_parts(tmp_path: Path) -> None:
    path = _file(tmp_path, "r.pdf", media.text_pdf(2))
    header, parts = run_job({"op": "pdf_pages_text", "args": {"path": path, "pages": [2]}})
    assert header["ok"] is True
    assert header["parts"] == [{"meta": {"page": 2, "chars": len(media.marker(2))}, "length": len(parts[0])}]
    assert run_job({"op": "format_disk", "args": {}}) == (
        {"ok": False, "code": "internal", "message": "unknown view operation"},
        [],
    )
    refused, _ = run_job(
        {"op": "pdf_facts", "args": {"path": _file(tmp_path, "bad.pdf", b"%PDF-1.7 nothing")}}
    )
    assert (refused["ok"], refused["code"]) == (False, "media_invalid")
    wrong, _ = run_job({"op": "pdf_facts", "args": {"nonsense": 1}})
    assert (wrong["ok"], wrong["code"]) == (False, "media_invalid")


def test_the_worker_process_reads_a_job_and_writes_its_answer(tmp_path: Path) -> None:
    path = _file(tmp_path, "r.pdf", media.text_pdf(2))
    job = json.dumps({"op": "pdf_facts", "args": {"path": path}}).encode()
    done = subprocess.run(
        [sys.executable, "-m", "blobstore.views.worker", str(1 << 31)],
        input=job,
        capture_output=True,
        check=True,
    )
    header = json.loads(done.stdout.split(b"\n", 1)[0])
    assert header["meta"]["pages"] == 2


async def test_a_worker_that_dies_halfway_through_its_answer_is_media_invalid() -> None:
    import anyio

    from blobstore.views.runner import DecoderRunner

    # A worker that announces ten bytes, sends three and exits (as one killed mid-write would).
    script = (
        "import sys; sys.stdin.buffer.read(); "
        'sys.stdout.buffer.write(b\'{"ok":true,"meta":{},"parts":[{"meta":{},"length":10}]}\\nabc\')'
    )
    process = await anyio.open_process([sys.executable, "-c", script])
    runner = DecoderRunner(workers=1, timeout=30, memory_bytes=0)
    try:
        with pytest.raises(MediaInvalid):
            await runner._exchange(process, b"{}")
    finally:
        await process.wait()
        await process.aclose()

"""The decoders and the worker's job protocol in this process, on the same real media (the engine tests run
them in worker processes)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from blobstore.errors import MediaInvalid, UnsupportedMedia, ViewTooLarge
from blobstore.views import decoders
from blobstore.views.worker import run_job
from tests.views import media


def _file(tmp_path: Path, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def test_pdf_text_image_and_facts(tmp_path: Path) -> None:
    path = _file(tmp_path, "r.pdf", media.text_pdf(3))
    assert decoders.pdf_facts(path).meta["pages"] == 3
    parts = decoders.pdf_pages_text(path, [3, 1]).parts
    assert [meta["page"] for meta, _ in parts] == [3, 1]
    assert media.marker(3).encode() in parts[0][1]
    image = decoders.pdf_page_png(path, 2, 300)
    assert max(image.meta["width"], image.meta["height"]) == 300
    with pytest.raises(MediaInvalid, match="past"):
        decoders.pdf_pages_text(path, [4])
    with pytest.raises(MediaInvalid, match="past"):
        decoders.pdf_page_png(path, 4, 300)


def test_ocr_reads_a_scanned_page(tmp_path: Path) -> None:
    path = _file(tmp_path, "s.pdf", media.scanned_pdf(["HELLO OCR 2026"]))
    ((meta, text),) = decoders.pdf_page_ocr(path, 1).parts
    assert meta["ocr"] is True
    assert b"HELLO OCR 2026" in text
    with pytest.raises(MediaInvalid, match="past"):
        decoders.pdf_page_ocr(path, 2)


def test_audio_and_video(tmp_path: Path) -> None:
    wav = _file(tmp_path, "p.wav", media.pattern_wav(3.0))
    assert decoders.audio_facts(wav).meta["duration_seconds"] == 3.0
    segment = decoders.audio_segment(wav, 2.5, 5.0)
    assert segment.meta["end_seconds"] == 3.0  # clipped to the end
    with pytest.raises(MediaInvalid, match="past the end"):
        decoders.audio_segment(wav, 3.0, 1.0)
    clip = _file(tmp_path, "c.mp4", media.numbered_video(2))
    assert decoders.video_facts(clip).meta["frame_rate"] == 10.0
    assert decoders.video_frames(clip, 2, 100, "frames").meta["times"] == [0.0, 1.0]
    ((sheet_meta, sheet),) = decoders.video_frames(clip, 2, 100, "sheet").parts
    assert sheet_meta["columns"] == 2
    assert sheet.startswith(b"\xff\xd8")
    with pytest.raises(UnsupportedMedia):
        decoders.video_facts(wav)
    with pytest.raises(UnsupportedMedia):
        decoders.audio_facts(clip)
    with pytest.raises(MediaInvalid):
        decoders.audio_facts(_file(tmp_path, "x.wav", b"RIFF\0\0\0\0WAVEjunk"))


def test_images(tmp_path: Path) -> None:
    png = _file(tmp_path, "i.png", media.png_bytes(300, 200))
    whole = decoders.image_view(png, None, 150)
    assert (whole.meta["width"], whole.meta["height"]) == (150, 100)
    edge = decoders.image_view(png, [250, 150, 100, 100], 1024)
    assert edge.meta["region"] == [250, 150, 50, 50]  # cut at the image's border
    with pytest.raises(MediaInvalid, match="outside"):
        decoders.image_view(png, [300, 0, 10, 10], 100)
    with pytest.raises(MediaInvalid):
        decoders.image_view(_file(tmp_path, "n.png", b"\x89PNG\r\n\x1a\nnot really"), None, 100)
    from PIL import Image

    out = io.BytesIO()
    Image.new("1", (10_000, 9_000)).save(out, format="PNG")
    with pytest.raises(ViewTooLarge):
        decoders.image_view(_file(tmp_path, "b.png", out.getvalue()), None, 100)


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
    view = decoders.image_view(
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

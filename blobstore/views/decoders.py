"""The decoders behind the media views: plain blocking functions over a file path, run in a worker process.

Each reads only what its view needs (one PDF page, the packets of one audio segment after a seek, a few
keyframes) and raises the catalogue's media errors for bytes it refuses. They import their libraries on first
use, so a worker that renders a page never loads FFmpeg.
"""

from __future__ import annotations

import io
import math
import os
import shutil
import subprocess
import tempfile
import warnings
import wave
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from blobstore.errors import MediaInvalid, UnsupportedMedia, ViewTooLarge

AUDIO_RATE: Final = 16_000
"""Audio views are 16 kHz mono PCM: enough for speech, a quarter of CD audio's samples."""
MAX_DECODE_PIXELS: Final = 80_000_000
"""Images with more pixels are refused before decoding (Pillow's bomb warning starts near 89 MP)."""
MAX_PAGE_SCALE: Final = 4.0
"""A page is rendered at most at 288 dpi, however small it is and however large the budget."""
FACT_TEXT_PAGES: Final = 50
"""Pages checked for a text layer when a PDF's facts are taken (the first ones)."""

_PDF_PASSWORD_ERROR: Final = 4


@dataclass(slots=True)
class Decoded:
    """What a decoder made: facts for the answer's text and zero or more binary parts (a page, a segment)."""

    meta: dict[str, Any] = field(default_factory=dict)
    parts: list[tuple[dict[str, Any], bytes]] = field(default_factory=list)


# -- PDF --------------------------------------------------------------------------------------------------


def _open_pdf(path: str) -> Any:
    import pypdfium2 as pdfium

    try:
        return pdfium.PdfDocument(path)
    except pdfium.PdfiumError as exc:
        if exc.err_code == _PDF_PASSWORD_ERROR:
            raise MediaInvalid("the PDF is encrypted with a password") from None
        raise MediaInvalid("the PDF could not be opened: it is damaged or not a PDF") from None


def _page_count(pdf: Any) -> int:
    count = len(pdf)
    if count <= 0:
        raise MediaInvalid("the PDF has no pages (its page tree is empty or broken)")
    return int(count)


def _page(pdf: Any, number: int) -> Any:
    import pypdfium2 as pdfium

    try:
        return pdf[number - 1]
    except (pdfium.PdfiumError, IndexError):
        raise MediaInvalid(f"page {number} of the PDF could not be loaded") from None


def _page_text(page: Any) -> str:
    textpage = page.get_textpage()
    try:
        return str(textpage.get_text_bounded()).replace("\r\n", "\n").strip()
    finally:
        textpage.close()


def pdf_facts(path: str) -> Decoded:
    pdf = _open_pdf(path)
    try:
        count = _page_count(pdf)
        checked = min(count, FACT_TEXT_PAGES)
        with_text = 0
        for number in range(1, checked + 1):
            page = _page(pdf, number)
            try:
                if _page_text(page):
                    with_text += 1
            finally:
                page.close()
        return Decoded(
            meta={
                "pages": count,
                "text_layer": with_text > 0,
                "text_pages_checked": checked,
                "text_pages": with_text,
            }
        )
    finally:
        pdf.close()


def pdf_pages_text(path: str, pages: list[int]) -> Decoded:
    """The text layer of each page (empty for a page without one)."""
    pdf = _open_pdf(path)
    try:
        count = _page_count(pdf)
        out = Decoded(meta={"pages": count})
        for number in pages:
            if not 1 <= number <= count:
                raise MediaInvalid(f"page {number} is past the PDF's last page ({count})")
            page = _page(pdf, number)
            try:
                text = _page_text(page)
            finally:
                page.close()
            out.parts.append(({"page": number, "chars": len(text)}, text.encode("utf-8")))
        return out
    finally:
        pdf.close()


def _render_page(
    path: str, number: int, scale_for: Callable[[float], float], *, grayscale: bool = False
) -> tuple[Any, int]:
    """Page ``number`` rendered at ``scale_for(its longer side in points)`` (a PIL image), and the count."""
    pdf = _open_pdf(path)
    try:
        count = _page_count(pdf)
        if not 1 <= number <= count:
            raise MediaInvalid(f"page {number} is past the PDF's last page ({count})")
        page = _page(pdf, number)
        try:
            width_pt, height_pt = page.get_size()
            if width_pt <= 0 or height_pt <= 0:
                raise MediaInvalid(f"page {number} has no area")
            bitmap = page.render(scale=scale_for(max(width_pt, height_pt)), grayscale=grayscale)
            try:
                return bitmap.to_pil(), count
            finally:
                bitmap.close()
        finally:
            page.close()
    finally:
        pdf.close()


def pdf_page_png(path: str, number: int, max_edge: int) -> Decoded:
    """One page rendered so that its longer side is at most ``max_edge`` pixels."""
    image, count = _render_page(path, number, lambda longer: min(MAX_PAGE_SCALE, max_edge / longer))
    data = io.BytesIO()
    image.save(data, format="PNG", optimize=True)
    meta = {"page": number, "pages": count, "width": image.width, "height": image.height}
    return Decoded(meta=meta, parts=[(meta, data.getvalue())])


OCR_SCALE: Final = 300 / 72
"""Pages are read by OCR at 300 dpi (what Tesseract is tuned for)..."""
OCR_MAX_EDGE: Final = 4096
"""...but never larger than 4096 px on the longer side."""


def ocr_command() -> str | None:
    """The Tesseract program when one is installed (Debian: ``tesseract-ocr``), else None."""
    return shutil.which("tesseract")


def pdf_page_ocr(path: str, number: int) -> Decoded:
    """The text Tesseract reads on one rendered page (for pages without a text layer)."""
    command = ocr_command()
    if command is None:
        raise UnsupportedMedia("no OCR engine is installed")
    image, count = _render_page(
        path, number, lambda longer: min(OCR_SCALE, OCR_MAX_EDGE / longer), grayscale=True
    )
    with tempfile.TemporaryDirectory(prefix="ocr-") as scratch:
        png = os.path.join(scratch, "page.png")
        image.save(png, format="PNG")
        # The worker's own time limit bounds this; a failure is a page OCR could not read, not a bad PDF.
        done = subprocess.run([command, png, "stdout"], capture_output=True, check=False)
    if done.returncode != 0:
        raise MediaInvalid(f"OCR could not read page {number}")
    text = done.stdout.decode("utf-8", errors="replace").strip()
    return Decoded(
        meta={"page": number, "pages": count}, parts=[({"page": number, "ocr": True}, text.encode())]
    )


# -- audio and video --------------------------------------------------------------------------------------


def _open_av(path: str) -> Any:
    import av

    av.logging.set_level(av.logging.PANIC)
    try:
        return av.open(path, metadata_errors="ignore")
    except (av.FFmpegError, UnicodeDecodeError):
        raise MediaInvalid("the file could not be opened as audio or video") from None


def _duration(container: Any, stream: Any) -> float:
    if stream.duration is not None and stream.time_base is not None:
        return float(stream.duration * stream.time_base)
    if container.duration is not None:
        return float(container.duration) / 1_000_000
    raise MediaInvalid("the file does not say how long it is")


def audio_facts(path: str) -> Decoded:
    with _open_av(path) as container:
        if not container.streams.audio:
            raise UnsupportedMedia("the file has no audio stream")
        stream = container.streams.audio[0]
        meta = {
            "duration_seconds": round(_duration(container, stream), 3),
            "sample_rate": int(stream.rate or stream.codec_context.sample_rate or 0),
            "channels": int(stream.codec_context.channels or 0),
            "codec": str(stream.codec_context.name),
        }
        _check_decodes(container, stream)
        return Decoded(meta=meta)


def _check_decodes(container: Any, stream: Any) -> None:
    """Decode the first packets: a header that opens but lies about what follows fails here, not later."""
    import av

    try:
        for frame in container.decode(stream):
            if frame.samples:
                return
    except av.FFmpegError:
        raise MediaInvalid("the stream's first packets could not be decoded") from None
    raise MediaInvalid("the stream holds no decodable samples")


def _origin(container: Any) -> float:
    """Where the file's own clock starts, in seconds: views count time from there. FFmpeg's timestamps
    start at the container's start time, not at 0: an MP3's first sample is at its encoder delay (about
    25 ms), an MPEG-TS recording's at whatever its broadcast clock said. So a segment after a seek starts
    where one decoded from the beginning would have it, and a keyframe at 3 s is 3 s into the video."""
    return container.start_time / 1_000_000 if container.start_time else 0.0


def _segment_samples(container: Any, stream: Any, start: float, duration: float) -> tuple[bytes, float]:
    """16 kHz mono s16 samples of ``[start, start + duration)``: a seek to the packet before ``start``,
    then decoding only until the segment is full. Also the time decoding began at (the seek's landing)."""
    import av

    resampler = av.AudioResampler(format="s16", layout="mono", rate=AUDIO_RATE)
    wanted = round(duration * AUDIO_RATE)
    out = bytearray()
    skip: int | None = None
    first = 0.0
    origin = _origin(container)
    if start > 0:
        target = int((start + origin) / stream.time_base)
        container.seek(target, stream=stream, backward=True, any_frame=False)
    try:
        for frame in container.decode(stream):
            if skip is None:
                first = float(frame.time) - origin if frame.time is not None else 0.0
                skip = max(0, round((start - first) * AUDIO_RATE))
            for piece in resampler.resample(frame):
                out += bytes(piece.planes[0])[: piece.samples * 2]
            if len(out) >= 2 * (skip + wanted):
                break
        else:
            for piece in resampler.resample(None):
                out += bytes(piece.planes[0])[: piece.samples * 2]
    except av.FFmpegError:
        raise MediaInvalid("the audio could not be decoded at that time") from None
    begin = 2 * (skip or 0)
    return bytes(out[begin : begin + 2 * wanted]), first


def audio_segment(path: str, start: float, duration: float) -> Decoded:
    """``[start, start + duration)`` (clipped to the end) as a 16 kHz mono PCM WAV file."""
    with _open_av(path) as container:
        if not container.streams.audio:
            raise UnsupportedMedia("the file has no audio stream")
        stream = container.streams.audio[0]
        stream.thread_type = "AUTO"
        total = _duration(container, stream)
        if start >= total:
            raise MediaInvalid(f"start {start:.1f} s is past the end ({total:.1f} s)")
        length = min(duration, total - start)
        samples, decoded_from = _segment_samples(container, stream, start, length)
    if not samples:
        raise MediaInvalid("no samples could be decoded at that time")
    data = io.BytesIO()
    with wave.open(data, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(AUDIO_RATE)
        out.writeframes(samples)
    end = start + len(samples) / 2 / AUDIO_RATE
    meta = {
        "start_seconds": start,
        "end_seconds": round(end, 6),
        "duration_seconds": round(total, 3),
        "sample_rate": AUDIO_RATE,
        "channels": 1,
        "decoded_from_seconds": round(decoded_from, 3),
    }
    return Decoded(meta=meta, parts=[(meta, data.getvalue())])


def video_facts(path: str) -> Decoded:
    with _open_av(path) as container:
        if not container.streams.video:
            raise UnsupportedMedia("the file has no video stream")
        stream = container.streams.video[0]
        rate = stream.average_rate or stream.guessed_rate
        meta: dict[str, Any] = {
            "duration_seconds": round(_duration(container, stream), 3),
            "width": int(stream.codec_context.width),
            "height": int(stream.codec_context.height),
            "frame_rate": round(float(rate), 3) if rate else None,
            "codec": str(stream.codec_context.name),
            "has_audio": bool(container.streams.audio),
        }
        return Decoded(meta=meta)


def _keyframes(path: str, count: int) -> Iterator[tuple[float, Any]]:
    """The keyframe at or before each of ``count`` evenly spaced times (the middle of each equal slice)."""
    import av

    with _open_av(path) as container:
        if not container.streams.video:
            raise UnsupportedMedia("the file has no video stream")
        stream = container.streams.video[0]
        total = _duration(container, stream)
        origin = _origin(container)
        for i in range(count):
            target = total * (i + 0.5) / count
            container.seek(
                int((target + origin) / stream.time_base), stream=stream, backward=True, any_frame=False
            )
            try:
                frame = next(container.decode(stream), None)
            except av.FFmpegError:
                raise MediaInvalid("a keyframe could not be decoded") from None
            if frame is None:
                raise MediaInvalid("no frame could be decoded near that time")
            yield max(0.0, float(frame.time or 0.0) - origin), frame.to_image()


def _fit(image: Any, max_edge: int) -> Any:
    from PIL import Image

    scale = min(1.0, max_edge / max(image.width, image.height))
    if scale >= 1.0:
        return image
    size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
    return image.resize(size, Image.Resampling.LANCZOS)


def _jpeg(image: Any) -> bytes:
    data = io.BytesIO()
    image.convert("RGB").save(data, format="JPEG", quality=85)
    return data.getvalue()


def video_frames(path: str, count: int, max_edge: int, layout: str) -> Decoded:
    """``count`` keyframes as JPEG images at most ``max_edge`` on their longer side, or one contact sheet."""
    frames = [(t, _fit(image, max_edge)) for t, image in _keyframes(path, count)]
    times = [round(t, 3) for t, _ in frames]
    if layout == "sheet":
        from PIL import Image

        # A video with fewer keyframes than times lands on one keyframe for several: a sheet shows it once.
        frames = [frame for i, frame in enumerate(frames) if i == 0 or times[i] != times[i - 1]]
        times = list(dict.fromkeys(times))
        columns = math.ceil(math.sqrt(len(frames)))
        rows = math.ceil(len(frames) / columns)
        cell_w = max(image.width for _, image in frames)
        cell_h = max(image.height for _, image in frames)
        scale = min(1.0, max_edge / max(cell_w * columns, cell_h * rows))
        cell = (max(1, round(cell_w * scale)), max(1, round(cell_h * scale)))
        sheet = Image.new("RGB", (cell[0] * columns, cell[1] * rows))
        for i, (_, image) in enumerate(frames):
            sheet.paste(image.resize(cell), ((i % columns) * cell[0], (i // columns) * cell[1]))
        meta = {"times": times, "width": sheet.width, "height": sheet.height, "columns": columns}
        return Decoded(meta={"times": times}, parts=[(meta, _jpeg(sheet))])
    parts = [
        ({"index": i, "time_seconds": t, "width": image.width, "height": image.height}, _jpeg(image))
        for i, (t, image) in enumerate(zip(times, (image for _, image in frames), strict=True))
    ]
    return Decoded(meta={"times": times}, parts=parts)


# -- images -----------------------------------------------------------------------------------------------


_PNG_MODES: Final = frozenset({"1", "L", "I;16", "RGB", "RGBA"})
"""Pillow modes a PNG holds as they are."""
_ALPHA_MODES: Final = frozenset({"P", "LA", "PA", "La", "RGBa"})


def _png_mode(image: Any) -> Any:
    """``image`` in a mode PNG can hold: a valid CMYK JPEG, a LAB or a float TIFF is shown in RGB rather
    than refused by the PNG writer; palette and alpha images keep their transparency."""
    if image.mode in _PNG_MODES:
        return image
    return image.convert("RGBA" if image.mode in _ALPHA_MODES else "RGB")


def image_view(path: str, region: list[int] | None, max_edge: int) -> Decoded:
    """A crop ``[x, y, w, h]`` of the original (or all of it), fitted to ``max_edge``; PNG out."""
    from PIL import Image

    Image.MAX_IMAGE_PIXELS = MAX_DECODE_PIXELS
    try:
        with warnings.catch_warnings():
            # Between one and two times the limit Pillow only warns: the size check below refuses those.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = Image.open(path)
    except Image.DecompressionBombError:
        raise ViewTooLarge(f"the image has more than {MAX_DECODE_PIXELS} pixels") from None
    except Exception:
        raise MediaInvalid("the file is not an image Pillow can decode") from None
    with image:
        width, height = image.size
        if width * height > MAX_DECODE_PIXELS:
            raise ViewTooLarge(f"the image has more than {MAX_DECODE_PIXELS} pixels")
        box = (0, 0, width, height)
        if region is not None:
            x, y, w, h = region
            if x >= width or y >= height:
                raise MediaInvalid(f"the region starts outside the {width}x{height} image")
            box = (x, y, min(width, x + w), min(height, y + h))
        try:
            if region is None and image.format == "JPEG":
                image.draft("RGB", (max_edge, max_edge))
            piece = image.crop(box) if region is not None else image.copy()
            piece.load()
        except Exception:
            raise MediaInvalid("the image's pixels could not be decoded") from None
    fitted = _fit(_png_mode(piece), max_edge)
    data = io.BytesIO()
    fitted.save(data, format="PNG", optimize=True)
    meta = {
        "region": [box[0], box[1], box[2] - box[0], box[3] - box[1]],
        "source_width": width,
        "source_height": height,
        "width": fitted.width,
        "height": fitted.height,
    }
    return Decoded(meta=meta, parts=[(meta, data.getvalue())])


OPERATIONS: Final[dict[str, Callable[..., Decoded]]] = {
    "pdf_facts": pdf_facts,
    "pdf_pages_text": pdf_pages_text,
    "pdf_page_png": pdf_page_png,
    "pdf_page_ocr": pdf_page_ocr,
    "audio_facts": audio_facts,
    "audio_segment": audio_segment,
    "video_facts": video_facts,
    "video_frames": video_frames,
    "image_view": image_view,
}

"""Media views: what a model spends to read one page, how long a first and a cached view take, peak memory.

Standalone (imports nothing of the other bench scripts). On a fresh data directory it makes its media with
real tools (a 200-page PDF written by PDFium, a two-hour 16 kHz mono WAV and the same as MP3 encoded by
FFmpeg) and reports:

- tokens to answer "what does page 37 say" on the 200-page PDF: reading the whole file in ``read_artifact``
  byte windows (every window's answer as the model receives it, at 4 bytes a token) against one
  ``read_artifact(uri, pages="37")`` view (its answer's text at 4 characters a token);
- wall time of the first and of a cached view: a page's text, a page's image, a 30 s segment at 0:00 and at
  1:59:00 of the WAV and of the MP3 (medians of ``--runs`` fresh caches);
- peak RSS during 16 views at once (``BLOBSTORE_VIEW_WORKERS=16``): the server process, the largest worker,
  and the sum of both sampled every 10 ms;
- OCR: the first and a cached OCR of page 37 (Tesseract, rendered at 300 dpi), and tokens to answer "what does
  the screenshot say" on a 1280x800 picture of a manual page (page 7 of Debian's libtasn1 manual where
  libtasn1-doc is installed, else page 37): the image as the model receives it (its estimate after the
  host's downscale) against ``read_artifact(uri, include_media=false)``'s OCR text answer, and
  ``read_artifact(uri, ocr=true)``'s text blocks and the JSON of its ``structuredContent`` (the boxes and
  confidences of every line and word);
- scene cuts: seconds to find the scenes of a video per minute of it (640x360 at 25 frames a second, a cut
  every 5 s between rendered pages, two minutes), comparing every frame;
- speech: on Debian's ALSA test voices (alsa-utils: "Front Center", "Front Left", ... eight of them, 5 s of
  silence between), the transcript's word error rate and real-time factor (PocketSphinx, first transcript,
  worker start included), the voice-activity detector's seconds per hour of audio (the speech map of the WAV
  recording), and tokens to answer "what did the speaker say at 0:12": the 30 s audio segment from 0:12
  against the transcript from 0:12; with ``--whisper-model DIR`` (a CTranslate2 Whisper model directory, the
  ``whisper`` extra installed) the same word error rate and real-time factor of faster-whisper.

    .venv/bin/python bench/views.py                  # the full run (makes about 350 MB of media)
    .venv/bin/python bench/views.py --hours 0.1      # a quick one over a six-minute recording
    .venv/bin/python bench/views.py --speech-only --hours 0.1   # the speech rows alone
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import io
import json
import math
import os
import resource
import shutil
import statistics
import struct
import tempfile
import threading
import time
import wave
from collections.abc import AsyncIterator, Callable, Coroutine
from datetime import timedelta
from fractions import Fraction
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import av
import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_raw
from mcp import Client

from blobstore.config import Settings
from blobstore.models import Caller
from blobstore.runtime import open_service
from blobstore.service import ArtifactService
from blobstore.views.engine import MediaViews
from mcp_resources.transports.server import create_server, fixed_caller

CALLER = Caller(namespace="default")
View = Callable[[], Coroutine[Any, Any, object]]
RATE = 16_000
BYTES_PER_TOKEN = 4


def pdf_bytes(pages: int) -> bytes:
    """``pages`` pages, each a heading and twenty lines of prose (a text layer), written by PDFium."""
    pdf = pdfium.PdfDocument.new()
    try:
        for number in range(1, pages + 1):
            page = pdf.new_page(612, 792)
            lines = [f"Section {number}: the findings of page {number}"] + [
                f"Line {i} of page {number}: measurements, remarks and a conclusion of some length."
                for i in range(20)
            ]
            for row, line in enumerate(lines):
                text = line.encode("utf-16-le") + b"\0\0"
                buffer = ctypes.create_string_buffer(text, len(text))
                obj = pdfium_raw.FPDFPageObj_NewTextObj(pdf, b"Helvetica", 11.0)
                pdfium_raw.FPDFText_SetText(obj, ctypes.cast(buffer, ctypes.POINTER(pdfium_raw.FPDF_WCHAR)))
                pdfium_raw.FPDFPageObj_Transform(obj, 1, 0, 0, 1, 72, 720 - 16 * row)
                pdfium_raw.FPDFPage_InsertObject(page, obj)
            pdfium_raw.FPDFPage_GenerateContent(page)
            page.close()
        out = io.BytesIO()
        pdf.save(out)
        return out.getvalue()
    finally:
        pdf.close()


def _tone_block(seconds: int) -> bytes:
    count = seconds * RATE
    return struct.pack(
        f"<{count}h", *(round(8000 * math.sin(2 * math.pi * 440 * i / RATE)) for i in range(count))
    )


def write_wav(path: Path, hours: float) -> None:
    block = _tone_block(10)
    blocks = math.ceil(hours * 3600 / 10)
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(RATE)
        for _ in range(blocks):
            out.writeframes(block)


def write_mp3(path: Path, hours: float) -> None:
    block = _tone_block(10)
    per_frame = 1152
    total = round(hours * 3600 * RATE)
    with av.open(str(path), "w", format="mp3") as container:
        stream = container.add_stream("libmp3lame", rate=RATE, layout="mono")
        assert isinstance(stream, av.AudioStream)
        stream.format = "s16p"
        for start in range(0, total, per_frame):
            count = min(per_frame, total - start)
            offset = 2 * (start % (10 * RATE))
            piece = (block + block)[offset : offset + 2 * count]
            frame = av.AudioFrame(format="s16p", layout="mono", samples=count)
            frame.planes[0].update(piece)
            frame.rate = RATE
            frame.pts = start
            frame.time_base = Fraction(1, RATE)
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)


async def _chunks(path: Path) -> AsyncIterator[bytes]:
    with path.open("rb") as file:
        while piece := file.read(1 << 20):
            yield piece


async def store(service: ArtifactService, path: Path) -> str:
    return (await service.create_artifact(CALLER, _chunks(path), name=path.name)).id


def answer_bytes(result: Any) -> int:
    return len(json.dumps(result.model_dump(by_alias=True, exclude_none=True, mode="json")).encode())


async def page_tokens(service: ArtifactService, pdf_id: str, size: int) -> dict[str, int]:
    server = create_server(service, caller_for=fixed_caller(CALLER))
    uri = f"blobstore://artifacts/{pdf_id}"
    window = service.settings.mcp_window_max
    windows_bytes = 0
    async with Client(server) as client:
        for offset in range(0, size, window):
            result = await client.call_tool("read_artifact", {"uri": uri, "offset": offset, "length": window})
            windows_bytes += answer_bytes(result)
        view = await client.call_tool("read_artifact", {"uri": uri, "pages": "37"})
    view_text = sum(len(block.text) for block in view.content if block.type == "text")
    return {
        "windows": math.ceil(size / window),
        "window_answers_tokens": math.ceil(windows_bytes / BYTES_PER_TOKEN),
        "page_view_tokens": math.ceil(view_text / BYTES_PER_TOKEN),
        "page_view_answer_bytes": answer_bytes(view),
    }


async def _timed(call: View) -> float:
    started = time.perf_counter()
    await call()
    return time.perf_counter() - started


async def _forget_views(service: ArtifactService) -> None:
    """Delete every cached view (the store's renditions), so the next reads decode: seen from past every
    artifact's expiry, each rendition is due for removal."""
    beyond = service.clock() + timedelta(days=365 * 100)
    while await service.repo.remove_renditions(now=beyond, limit=500):
        pass


async def view_times(
    service: ArtifactService, ids: dict[str, str], runs: int, root: Path
) -> dict[str, dict[str, float]]:
    late = 3600 * 2 - 60  # 1:59:00 of a two-hour recording (the last minute of a shorter one)
    first: dict[str, list[float]] = {}
    cached: dict[str, list[float]] = {}
    for run in range(runs):
        await _forget_views(service)
        views = MediaViews(service, spool=root / f"run-{run}")
        pdf = await views.open(CALLER, ids["pdf"])
        wav = await views.open(CALLER, ids["wav"])
        mp3 = await views.open(CALLER, ids["mp3"])
        total = float(wav.artifact.media.get("duration_seconds") or 0)
        at = min(late, max(0.0, total - 60))
        cases: dict[str, View] = {
            "page text": partial(views.page_texts, pdf, (37,)),
            "page image": partial(views.page_image, pdf, 37),
            "wav 30 s at 0:00": partial(views.audio, wav, 0.0, 30.0),
            f"wav 30 s at {at / 60:.0f} min": partial(views.audio, wav, at, 30.0),
            "mp3 30 s at 0:00": partial(views.audio, mp3, 0.0, 30.0),
            f"mp3 30 s at {at / 60:.0f} min": partial(views.audio, mp3, at, 30.0),
        }
        for name, call in cases.items():
            first.setdefault(name, []).append(await _timed(call))
            cached.setdefault(name, []).append(await _timed(call))
    return {
        name: {
            "first_ms": 1000 * statistics.median(first[name]),
            "cached_ms": 1000 * statistics.median(cached[name]),
        }
        for name in first
    }


def _rss_of(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as file:
            return [int(child) for child in file.read().split()]
    except OSError:
        return []


async def parallel_rss(settings: Settings, ids: dict[str, str], root: Path) -> dict[str, float]:
    """16 views at once, each a first read: PDF pages as images and text, segments of the recordings."""
    wide = settings.model_copy(update={"view_workers": 16})
    peak = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        me = os.getpid()
        while not stop.is_set():
            peak = max(peak, _rss_of(me) + sum(_rss_of(child) for child in _children(me)))
            time.sleep(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    async with open_service(wide) as service:
        await _forget_views(service)
        views = MediaViews(service, spool=root / "parallel")
        pdf = await views.open(CALLER, ids["pdf"])
        wav = await views.open(CALLER, ids["wav"])
        mp3 = await views.open(CALLER, ids["mp3"])
        calls: list[View] = []
        calls += [partial(views.page_image, pdf, 10 + i) for i in range(6)]
        calls += [partial(views.page_texts, pdf, (50 + i,)) for i in range(4)]
        total = float(wav.artifact.media.get("duration_seconds") or 0)
        starts = [max(0.0, total * (i + 1) / 4 - 30) for i in range(3)]
        calls += [partial(views.audio, wav, start, 30.0) for start in starts]
        calls += [partial(views.audio, mp3, start, 30.0) for start in starts]
        sampler.start()
        started = time.perf_counter()
        async with anyio.create_task_group() as group:
            for call in calls:
                group.start_soon(call)
        elapsed = time.perf_counter() - started
        stop.set()
        sampler.join()
    worker = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    server = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {
        "views": len(calls),
        "wall_s": round(elapsed, 2),
        "peak_total_mib": round(peak / 2**20, 1),
        "largest_worker_mib": round(worker / 2**20, 1),
        "server_mib": round(server / 2**20, 1),
    }


LIBTASN1 = Path("/usr/share/doc/libtasn1-doc/libtasn1.pdf")


def page_picture(pdf: Path, page: int, width: int, height: int) -> Any:
    """``page`` of ``pdf`` rendered ``width`` pixels wide, its top ``height`` pixels: a screen of a manual."""
    document = pdfium.PdfDocument(str(pdf))
    try:
        loaded = document[page - 1]
        bitmap = loaded.render(scale=width / loaded.get_width())
        image = bitmap.to_pil().convert("RGB").crop((0, 0, width, height))
        bitmap.close()
        loaded.close()
        return image
    finally:
        document.close()


def write_scenes_video(path: Path, pdf: Path, minutes: float) -> None:
    """640x360 H.264 at 25 frames/s: a rendered page a scene, each held 5 s while it scrolls 2 px a frame."""
    pages = [page_picture(pdf, number, 640, 2000) for number in range(1, 13)]
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=25, options={"preset": "ultrafast"})
        stream.width, stream.height = 640, 360
        stream.pix_fmt = "yuv420p"
        for number in range(round(minutes * 60 * 25)):
            scene, into = divmod(number, 125)
            shot = pages[scene % len(pages)].crop((0, 2 * into, 640, 2 * into + 360))
            frame = av.VideoFrame.from_image(shot)  # type: ignore[no-untyped-call]
            frame.pts = number
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)


async def ocr_rows(service: ArtifactService, ids: dict[str, str], root: Path) -> dict[str, Any]:
    """OCR of page 37 (first and cached), and the screenshot question in tokens: image against OCR text."""
    from blobstore.tokens import estimate_image_tokens, estimate_text_tokens
    from blobstore.views.text_views import text_view

    await _forget_views(service)
    views = MediaViews(service, spool=root / "ocr")
    pdf = await views.open(CALLER, ids["pdf"])
    first = await _timed(partial(views.page_ocr, pdf, 37))
    cached = await _timed(partial(views.page_ocr, pdf, 37))
    shot = await views.open(CALLER, ids["screenshot"])
    read_started = time.perf_counter()
    found = await text_view(views, shot)
    read_ms = 1000 * (time.perf_counter() - read_started)
    assert found is not None
    server = create_server(service, caller_for=fixed_caller(CALLER))
    async with Client(server) as client:
        answer = await client.call_tool(
            "read_artifact", {"uri": f"blobstore://artifacts/{ids['screenshot']}", "include_media": False}
        )
        positions = await client.call_tool(
            "read_artifact", {"uri": f"blobstore://artifacts/{ids['screenshot']}", "ocr": True}
        )
    answer_text = sum(len(block.text) for block in answer.content if block.type == "text")
    positions_text = sum(len(block.text) for block in positions.content if block.type == "text")
    positions_json = json.dumps(positions.structured_content, ensure_ascii=False, separators=(",", ":"))
    return {
        "page_37_ocr_first_ms": 1000 * first,
        "page_37_ocr_cached_ms": 1000 * cached,
        "screenshot_ocr_ms": read_ms,
        "screenshot": {
            "image_tokens": estimate_image_tokens(1280, 800),
            "ocr_text_tokens": estimate_text_tokens(found.text),
            "ocr_answer_tokens": math.ceil(answer_text / BYTES_PER_TOKEN),
            "ocr_true_answer_tokens": math.ceil(positions_text / BYTES_PER_TOKEN),
            "ocr_true_positions_json_tokens": math.ceil(len(positions_json) / BYTES_PER_TOKEN),
            "words": found.head,
        },
    }


async def scene_rows(service: ArtifactService, video_id: str, minutes: float, root: Path) -> dict[str, Any]:
    views = MediaViews(service, spool=root / "scenes")
    video = await views.open(CALLER, video_id)
    seconds = await _timed(partial(views.scenes, video, 8))
    frames = await views.scenes(video, 8)
    return {
        "video_minutes": minutes,
        "scenes_found": frames[0].meta["scenes"],
        "scenes_made": math.ceil(minutes * 60 / 5),
        "compared": frames[0].meta["compared"],
        "seconds": seconds,
        "seconds_per_minute": seconds / minutes,
    }


ALSA = Path("/usr/share/sounds/alsa")
VOICES = (
    *("Front_Center", "Front_Left", "Front_Right"),
    *("Rear_Center", "Rear_Left", "Rear_Right"),
    *("Side_Left", "Side_Right"),
)
VOICE_GAP = 5.0


def write_voices(path: Path) -> None:
    """The ALSA voices one after another, :data:`VOICE_GAP` seconds of silence between, as a 48 kHz mono
    WAV: they say :func:`found_reference`."""
    pcm = []
    for name in VOICES:
        with wave.open(str(ALSA / f"{name}.wav"), "rb") as voice:
            pcm.append(voice.readframes(voice.getnframes()))
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(48_000)
        out.writeframes(bytes(2 * round(VOICE_GAP * 48_000)).join(pcm))


def word_error_rate(reference: str, heard: str) -> float:
    """(substitutions + deletions + insertions) / reference words, by edit distance over words."""
    ref, hyp = reference.split(), heard.split()
    row = list(range(len(hyp) + 1))
    for i, word in enumerate(ref, 1):
        previous, row[0] = row[0], i
        for j, other in enumerate(hyp, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (word != other))
    return row[-1] / len(ref)


async def transcribe_row(views: MediaViews, voices: Any, length: float) -> dict[str, Any]:
    """The word error rate and real-time factor of the first transcript of the voices (a worker's start
    included)."""
    from blobstore.views.kinds import transcripts

    started = time.perf_counter()
    found = await transcripts.transcript(views, voices, 0.0, None)
    seconds = time.perf_counter() - started
    heard = " ".join(str(segment["text"]) for segment in found.segments)
    spoken = sum(end - start for start, end in found.window.speech)
    return {
        "engine": found.engine,
        "heard": heard,
        "word_error_rate": round(word_error_rate(found_reference(), heard), 3),
        "transcript_seconds": round(seconds, 3),
        "real_time_factor": round(seconds / length, 3),
        "real_time_factor_of_speech": round(seconds / spoken, 3),
    }


async def speech_rows(
    service: ArtifactService, ids: dict[str, str], hours: float, root: Path, whisper_model: Path | None = None
) -> dict[str, Any]:
    """Word error rate and real-time factor of the transcript, VAD time per hour, and the 0:12 question."""
    from blobstore.tokens import estimate_text_tokens

    await _forget_views(service)
    views = MediaViews(service, spool=root / "speech")
    voices = await views.open(CALLER, ids["voices"])
    length = float((await views.facts(voices))["duration_seconds"])
    sphinx = await transcribe_row(views, voices, length)
    whisper: dict[str, Any] | str = "not measured: no --whisper-model"
    if whisper_model is not None:
        views.settings = views.settings.model_copy(
            update={"transcribe_engine": "whisper", "transcribe_model": whisper_model}
        )
        whisper = await transcribe_row(views, voices, length)
        views.settings = service.settings
    recording = await views.open(CALLER, ids["wav"])
    started = time.perf_counter()
    await views.speech(recording)
    vad = time.perf_counter() - started
    server = create_server(service, caller_for=fixed_caller(CALLER))
    uri = f"blobstore://artifacts/{ids['voices']}"
    async with Client(server) as client:
        segment = await client.call_tool(
            "read_artifact", {"uri": uri, "start_seconds": 12, "duration_seconds": 30}
        )
        said = await client.call_tool(
            "read_artifact", {"uri": uri, "transcript": True, "start_seconds": 12, "duration_seconds": 30}
        )
    segment_view = segment.structured_content["view"] if segment.structured_content else {}
    said_text = "\n".join(block.text for block in said.content if block.type == "text")
    return {
        "recording": "ALSA voices, " + ", ".join(VOICES) + f", {VOICE_GAP:g} s apart",
        "recording_seconds": length,
        "reference": found_reference(),
        **sphinx,
        "whisper": whisper,
        "vad_seconds_per_hour": round(vad / hours, 3),
        "at_0_12": {
            "audio_segment_tokens": segment_view.get("estimated_tokens"),
            "transcript_answer_tokens": estimate_text_tokens(said_text),
            "transcript": said_text,
        },
    }


def found_reference() -> str:
    return " ".join(name.replace("_", " ").lower() for name in VOICES)


async def main(
    hours: float, runs: int, keep: bool, speech_only: bool = False, whisper_model: Path | None = None
) -> None:
    if speech_only:
        await speech_main(hours, keep, whisper_model)
        return
    work = Path(tempfile.mkdtemp(prefix="bench-views-"))
    try:
        media = work / "media"
        media.mkdir()
        made = time.perf_counter()
        (media / "report.pdf").write_bytes(pdf_bytes(200))
        write_wav(media / "meeting.wav", hours)
        write_mp3(media / "meeting.mp3", hours)
        installed = await anyio.Path(LIBTASN1).exists()
        manual, manual_page = (LIBTASN1, 7) if installed else (media / "report.pdf", 37)
        page_picture(manual, manual_page, 1280, 800).save(media / "screenshot.png")
        write_voices(media / "voices.wav")
        scene_minutes = 2.0
        write_scenes_video(media / "scenes.mp4", manual, scene_minutes)
        print(
            f"media made in {time.perf_counter() - made:.1f} s:",
            {p.name: p.stat().st_size for p in media.iterdir()},
        )
        settings = Settings(data_dir=work / "data")
        async with open_service(settings) as service:
            ids = {
                "pdf": await store(service, media / "report.pdf"),
                "wav": await store(service, media / "meeting.wav"),
                "mp3": await store(service, media / "meeting.mp3"),
                "screenshot": await store(service, media / "screenshot.png"),
                "video": await store(service, media / "scenes.mp4"),
                "voices": await store(service, media / "voices.wav"),
            }
            tokens = await page_tokens(service, ids["pdf"], (media / "report.pdf").stat().st_size)
            times = await view_times(service, ids, runs, work / "views")
            ocr = await ocr_rows(service, ids, work / "views")
            scenes = await scene_rows(service, ids["video"], scene_minutes, work / "views")
            speech = await speech_rows(service, ids, hours, work / "views", whisper_model)
        rss = await parallel_rss(settings, ids, work)
        report = {
            "page_37_tokens": tokens,
            "view_times": times,
            "ocr": ocr,
            "scene_cuts": scenes,
            "speech": speech,
            "parallel_16": rss,
        }
        print(json.dumps(report, indent=2))
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


async def speech_main(hours: float, keep: bool, whisper_model: Path | None) -> None:
    """The speech rows alone: the ALSA voices and a WAV recording of ``hours``."""
    work = Path(tempfile.mkdtemp(prefix="bench-speech-"))
    try:
        write_voices(work / "voices.wav")
        write_wav(work / "meeting.wav", hours)
        async with open_service(Settings(data_dir=work / "data")) as service:
            ids = {
                "voices": await store(service, work / "voices.wav"),
                "wav": await store(service, work / "meeting.wav"),
            }
            found = await speech_rows(service, ids, hours, work / "views", whisper_model)
            print(json.dumps({"speech": found}, indent=2))
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hours", type=float, default=2.0, help="length of the recordings (default 2)")
    parser.add_argument("--runs", type=int, default=3, help="fresh caches to take medians over (default 3)")
    parser.add_argument("--keep", action="store_true", help="keep the media and data directory")
    parser.add_argument("--speech-only", action="store_true", help="only the speech rows")
    parser.add_argument("--whisper-model", type=Path, help="a CTranslate2 Whisper model directory to measure")
    options = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(main, options.hours, options.runs, options.keep, options.speech_only, options.whisper_model)

"""Media facts and type sniffing from an artifact's first bytes.

A declared MIME type is kept unless the bytes contradict it: a file that claims ``image/png`` but is not one
is stored as what it is (sniffed type, or ``application/octet-stream``) with no image facts. Probing never
raises: whatever Pillow or the WAV parser reject simply yields no facts. A PNG is read as browsers read it
(:func:`~blobstore.png_repair.checked_png`).
"""

from __future__ import annotations

import io
import mimetypes
import re
import struct
import warnings
from collections.abc import Mapping
from typing import Any

from blobstore.png_repair import checked_png

PROBE_BYTES = 256 * 1024
"""How much of the head is read to sniff the type and the media facts."""

_MAGIC: list[tuple[bytes, int, str]] = [
    (b"\x89PNG\r\n\x1a\n", 0, "image/png"),
    (b"\xff\xd8\xff", 0, "image/jpeg"),
    (b"GIF87a", 0, "image/gif"),
    (b"GIF89a", 0, "image/gif"),
    (b"%PDF-", 0, "application/pdf"),
    (b"fLaC", 0, "audio/flac"),
    (b"OggS", 0, "audio/ogg"),
    (b"ID3", 0, "audio/mpeg"),
    (b"PK\x03\x04", 0, "application/zip"),
]
_MIME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9!#$&^_.+-]{0,126}/[a-zA-Z0-9][a-zA-Z0-9!#$&^_.+-]{0,126}$")
_FAMILY_CHECKED = ("image/", "audio/", "application/pdf")


_EXTENSIONS = {"audio/wav": ".wav", "audio/wave": ".wav", "audio/webm": ".weba"}
"""Audio types MCP servers send that the stdlib's table lacks (it knows only ``audio/x-wav``)."""


def file_extension(mime: str) -> str:
    """The file name extension for a MIME type (``.png``), ``.bin`` for one nobody knows."""
    return mimetypes.guess_extension(mime) or _EXTENSIONS.get(mime) or ".bin"


def is_valid_mime(value: str) -> bool:
    """RFC 6838 ``type/subtype`` without parameters."""
    return _MIME.fullmatch(value) is not None


def sniff(head: bytes) -> str | None:
    """The MIME type the leading bytes prove, if any."""
    for magic, offset, mime in _MAGIC:
        if head[offset : offset + len(magic)] == magic:
            return mime
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return "audio/wav"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def looks_like_text(head: bytes) -> bool:
    if b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A multi-byte character cut at the end of the probe window is still text.
        return exc.start >= len(head) - 3
    return True


def resolve_mime(declared: str | None, name: str, head: bytes) -> str:
    """The MIME type to store: the declared one unless the bytes contradict it, else a sniffed one."""
    sniffed = sniff(head)
    if declared:
        base = declared.split(";", 1)[0].strip().lower()
        if sniffed and base == sniffed:
            return base
        contradicted = base.startswith(_FAMILY_CHECKED) and sniffed != base
        if not contradicted:
            return base
        return sniffed or ("text/plain" if head and looks_like_text(head) else "application/octet-stream")
    if sniffed:
        return sniffed
    guessed, _ = mimetypes.guess_type(name)
    if guessed and not guessed.startswith(_FAMILY_CHECKED):
        return guessed
    if head and looks_like_text(head):
        return "text/plain"
    return "application/octet-stream"


def probe(mime_type: str, head: bytes) -> dict[str, Any]:
    """Media facts for a stored artifact: image width/height/format, audio duration/sample rate/channels."""
    if mime_type.startswith("image/"):
        return _image_facts(head)
    if mime_type in {"audio/wav", "audio/x-wav", "audio/wave"}:
        return _wav_facts(head)
    return {}


def _image_facts(head: bytes) -> dict[str, Any]:
    from PIL import Image  # on the first image: processes that store no images do without Pillow

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with Image.open(checked_png(io.BytesIO(head))) as image:
                width, height = image.size
                return {"width": width, "height": height, "format": (image.format or "").lower()}
    except Exception:
        return {}


def _wav_facts(head: bytes) -> dict[str, Any]:
    """Parse the RIFF/WAVE ``fmt `` and ``data`` chunk headers (the data size gives the duration)."""
    if head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        return {}
    pos = 12
    channels = sample_rate = block_align = 0
    while pos + 8 <= len(head):
        chunk_id = head[pos : pos + 4]
        (chunk_size,) = struct.unpack_from("<I", head, pos + 4)
        body = pos + 8
        if chunk_id == b"fmt " and body + 16 <= len(head):
            _fmt, channels, sample_rate, _byte_rate, block_align = struct.unpack_from("<HHIIH", head, body)
        elif chunk_id == b"data":
            if not (channels and sample_rate and block_align):
                return {}
            frames = chunk_size // block_align
            return {
                "duration_seconds": round(frames / sample_rate, 6),
                "sample_rate": sample_rate,
                "channels": channels,
            }
        pos = body + chunk_size + (chunk_size & 1)
    return {}


def _seconds(value: float) -> str:
    return f"{value:.1f}"


# -- facts in words (the resource_link description, tool_result_for, the proxy's offload lines) --------


def clock(value: float, *, up: bool = False) -> str:
    """``75.2`` as ``1:15`` (``1:16`` rounded ``up``), ``3725`` as ``1:02:05``: a speech map's times."""
    whole = int(-(-value // 1)) if up else int(value)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def speech_words(facts: Mapping[str, Any]) -> str | None:
    """The speech map in words: ``speech 0:00-0:04, 0:12-0:15 of 0:16``, ``no speech in 0:30``; None when
    the facts hold no map. A span's start is rounded down and its end up, so each holds its speech."""
    spans = facts.get("speech")
    duration = facts.get("duration_seconds")
    if not isinstance(spans, list) or not isinstance(duration, int | float):
        return None
    of = clock(duration, up=True)
    if not spans:
        return f"no speech in {of}"
    listed = ", ".join(f"{clock(start)}-{clock(end, up=True)}" for start, end in spans)
    return f"speech {listed} of {of}"


def facts_line(mime_type: str, facts: Mapping[str, Any]) -> str | None:
    """The media facts in words, or None when there are none worth saying: ``PDF, 42 pages, text layer``;
    ``audio, 612.4 s, 44100 Hz, 2 channels``; ``video, 12.0 s, 1280x720, 25 fps``."""
    if "pages" in facts:
        layer = "text layer" if facts.get("text_layer") else "no text layer (scanned pages)"
        noun = "page" if facts["pages"] == 1 else "pages"
        return f"PDF, {facts['pages']} {noun}, {layer}"
    duration = facts.get("duration_seconds")
    if not isinstance(duration, int | float):
        return None
    speech = speech_words(facts)
    if mime_type.startswith("video/") and "width" in facts:
        rate = facts.get("frame_rate")
        shown = f", {rate:g} fps" if isinstance(rate, int | float) else ""
        line = f"video, {_seconds(duration)} s, {facts['width']}x{facts['height']}{shown}"
        return f"{line}, {speech}" if speech else line
    parts = [f"audio, {_seconds(duration)} s"]
    if facts.get("sample_rate"):
        parts.append(f"{facts['sample_rate']} Hz")
    if facts.get("channels"):
        parts.append(f"{facts['channels']} channel{'s' if facts['channels'] != 1 else ''}")
    if speech:
        parts.append(speech)
    return ", ".join(parts)


def first_view_hint(
    mime_type: str, facts: Mapping[str, Any], max_audio_seconds: float = 30.0, tool: str = "read_artifact"
) -> str | None:
    """The view to call first: ``read page 1 with read_artifact(uri, pages="1")``; for a recording in which
    speech was found (or whose speech map is not known), its transcript first, the sound as evidence. ``tool``
    is the read tool's name where the host offers it under another (the proxy renames it beside an upstream's
    own)."""
    if "pages" in facts:
        return f'read page 1 with {tool}(uri, pages="1")'
    duration = facts.get("duration_seconds")
    if not isinstance(duration, int | float):
        return None
    said = f"read what is said with {tool}(uri, transcript=true)"
    if mime_type.startswith("video/"):
        hint = f"see it with {tool}(uri, frames=6); hear it with {tool}(uri, start_seconds=0)"
        return f"{hint}; {said}" if facts.get("speech") else hint
    length = min(max_audio_seconds, duration)
    hear = f"hear the first {length:g} s with {tool}(uri, start_seconds=0, duration_seconds={length:g})"
    return hear if facts.get("speech") == [] else f"{said}; {hear}"


def media_summary(mime_type: str, facts: Mapping[str, Any], max_audio_seconds: float = 30.0) -> str | None:
    """:func:`facts_line` and :func:`first_view_hint` in one sentence, for offload and link lines."""
    line = facts_line(mime_type, facts)
    if line is None:
        return None
    hint = first_view_hint(mime_type, facts, max_audio_seconds)
    return f"{line}; {hint}" if hint else line

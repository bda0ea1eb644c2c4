"""Media formats by name, and the format a file's first bytes prove.

A typed media argument (an image, a recording, a video, a PDF) is accepted or refused by what its bytes are,
never by its name or a type the caller claims: :func:`sniff_format` reads the signatures the formats' own
specifications fix at the start of the file. Sans-I/O: bytes in, a name out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

MediaKind = Literal["image", "audio", "video", "document"]
KINDS: Final[tuple[MediaKind, ...]] = ("image", "audio", "video", "document")


@dataclass(frozen=True, slots=True)
class MediaFormat:
    name: str
    kind: MediaKind
    mime_type: str


FORMATS: Final[dict[str, MediaFormat]] = {
    fmt.name: fmt
    for fmt in (
        MediaFormat("png", "image", "image/png"),
        MediaFormat("jpeg", "image", "image/jpeg"),
        MediaFormat("gif", "image", "image/gif"),
        MediaFormat("webp", "image", "image/webp"),
        MediaFormat("mp3", "audio", "audio/mpeg"),
        MediaFormat("wav", "audio", "audio/wav"),
        MediaFormat("ogg", "audio", "audio/ogg"),
        MediaFormat("flac", "audio", "audio/flac"),
        MediaFormat("mp4", "video", "video/mp4"),
        MediaFormat("webm", "video", "video/webm"),
        MediaFormat("mov", "video", "video/quicktime"),
        MediaFormat("pdf", "document", "application/pdf"),
    )
}
"""Every format a typed argument may be, by its canonical name."""
ALIASES: Final[dict[str, str]] = {"jpg": "jpeg", "wave": "wav", "quicktime": "mov", "mpeg": "mp3"}


def canonical_format(name: str) -> str:
    """A format's canonical name (``jpg`` is ``jpeg``); ``ValueError`` for a name not in :data:`FORMATS`."""
    key = name.strip().lower().lstrip(".")
    key = ALIASES.get(key, key)
    if key not in FORMATS:
        raise ValueError(f"unknown media format {name!r}; known: {', '.join(FORMATS)}")
    return key


def formats_of(kind: MediaKind) -> tuple[str, ...]:
    return tuple(name for name, fmt in FORMATS.items() if fmt.kind == kind)


def _mp3_frame(head: bytes) -> bool:
    """An MPEG audio Layer III frame header: 11 sync bits, a version that exists, layer bits ``01``, and a
    bitrate index and sample rate that are not the reserved ones (ISO/IEC 11172-3, 2.4.1.3)."""
    if len(head) < 4 or head[0] != 0xFF or head[1] & 0xE0 != 0xE0:
        return False
    version = (head[1] >> 3) & 0b11
    layer = (head[1] >> 1) & 0b11
    bitrate = head[2] >> 4
    rate = (head[2] >> 2) & 0b11
    return version != 0b01 and layer == 0b01 and bitrate not in (0b0000, 0b1111) and rate != 0b11


def _iso_media(head: bytes) -> str | None:
    """ISO base media (ISO/IEC 14496-12): a ``ftyp`` box first, whose major brand tells QuickTime apart."""
    if len(head) < 12 or head[4:8] != b"ftyp":
        return None
    brand = head[8:12]
    if brand == b"qt  ":
        return "mov"
    if brand in (b"M4A ", b"M4B ", b"M4P "):
        return None  # audio in MP4 (AAC): not one of the accepted audio formats
    return "mp4"


def _ebml(head: bytes) -> str | None:
    """Matroska's EBML header (RFC 9559): WebM says ``webm`` as its DocType near the start."""
    if head[:4] != b"\x1a\x45\xdf\xa3":
        return None
    return "webm" if b"webm" in head[:64] else None


def sniff_format(head: bytes) -> str | None:
    """The format the leading bytes prove (a name of :data:`FORMATS`), or None."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if head.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "webp"
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return "wav"
    if head.startswith(b"%PDF-"):
        return "pdf"
    if head.startswith(b"fLaC"):
        return "flac"
    if head.startswith(b"OggS"):
        return "ogg"
    if head.startswith(b"ID3") or _mp3_frame(head):
        return "mp3"
    return _iso_media(head) or _ebml(head)


__all__ = [
    "ALIASES",
    "FORMATS",
    "KINDS",
    "MediaFormat",
    "MediaKind",
    "canonical_format",
    "formats_of",
    "sniff_format",
]

"""PNG chunks checked as browsers check them, before Pillow reads the file.

Every PNG chunk ends with a CRC of its type and data. PNG (ISO/IEC 15948, second edition) says of an
*ancillary* chunk (§4.7.2, first letter of its type lower case, §5.4) that "a PNG decoder, without processing
an ancillary chunk, can still produce a meaningful image", and of CRCs (§13.2): "It is strongly recommended
that decoders should verify the CRC on each chunk." libpng, and the browsers built on it, act on both: an
ancillary chunk whose CRC fails is dropped with a warning, a *critical* chunk's (``IHDR``, ``PLTE``, ``IDAT``,
``IEND``) fails the file. Pillow refuses both (unless ``LOAD_TRUNCATED_IMAGES``, which also accepts truncated
pixel data, is set for the whole process), so a PNG every browser shows, with a damaged colour profile
(``iCCP``) say, would be "not an image".

:func:`checked_png` gives a decoder the file as a browser reads it: the same file when every chunk checks out
(or it is not a PNG), a view of it without the ancillary chunks whose CRC fails, and ``media_invalid`` naming
the chunk when a critical one's fails. :class:`ChunkWalker` is the sans-I/O part: it takes the bytes in pieces
of any size and keeps only a chunk's twelve bytes of length, type and CRC in memory, so checking costs one
streamed read of the file, never a copy of it.
"""

from __future__ import annotations

import io
import struct
import zlib
from bisect import bisect_right
from dataclasses import dataclass
from typing import IO, Final

from blobstore.errors import MediaInvalid

SIGNATURE: Final = b"\x89PNG\r\n\x1a\n"
MAX_LENGTH: Final = 2**31 - 1
"""§5.3: "A four-byte unsigned integer giving the number of bytes in the chunk's data field. [...] Although
encoders and decoders should treat the length as unsigned, its value shall not exceed 2^31-1 bytes." """
PIECE: Final = 64 * 1024
"""How much of the file is read at a time while it is checked."""
MAX_DROPPED: Final = 1024
"""Ancillary chunks whose CRC fails that a file may have: each costs a span in the view, so a file made of
millions of them is refused rather than held in memory."""


@dataclass(frozen=True, slots=True)
class Chunk:
    """A whole chunk of the stream: its type, where it starts (its length field), whether its CRC holds."""

    kind: bytes
    start: int
    length: int
    crc_ok: bool

    @property
    def end(self) -> int:
        """Where the next chunk starts: length, type, data and CRC."""
        return self.start + 12 + self.length

    @property
    def ancillary(self) -> bool:
        """§5.4: "Ancillary bit: first byte. 0 (uppercase) = critical, 1 (lowercase) = ancillary." """
        return bool(self.kind[0] & 0x20)


class ChunkWalker:
    """The chunks of a PNG stream, from its bytes fed in pieces of any size.

    Walking ends (:attr:`finished`) after ``IEND``, at once when the stream does not start with the PNG
    signature (:attr:`png` is then False), or at a chunk header that cannot be one (a type that is not four
    letters, a length over 2^31-1): what follows is left to the decoder, which refuses it or not, as it would
    have. A chunk cut off by the end of the bytes is never reported.
    """

    def __init__(self) -> None:
        self.offset = 0
        """Bytes of the stream consumed so far."""
        self.finished = False
        self.png = True
        self._field = bytearray()
        self._want = len(SIGNATURE)
        self._state = "signature"
        self._kind = b""
        self._start = 0
        self._length = 0
        self._left = 0
        self._crc = 0

    def feed(self, data: bytes | bytearray | memoryview) -> list[Chunk]:
        """The chunks completed by ``data`` (bytes past the end of the walk are not consumed)."""
        done: list[Chunk] = []
        view = memoryview(data).cast("B")
        while view and not self.finished:
            if self._state == "data":
                take = min(self._left, len(view))
                self._crc = zlib.crc32(view[:take], self._crc)
                self._left -= take
                self.offset += take
                view = view[take:]
                if self._left == 0:
                    self._expect("crc", 4)
                continue
            take = min(self._want - len(self._field), len(view))
            self._field += view[:take]
            self.offset += take
            view = view[take:]
            if len(self._field) == self._want:
                field = bytes(self._field)
                self._field.clear()
                chunk = self._field_done(field)
                if chunk is not None:
                    done.append(chunk)
        return done

    def _expect(self, state: str, size: int) -> None:
        self._state = state
        self._want = size

    def _field_done(self, field: bytes) -> Chunk | None:
        if self._state == "signature":
            self.png = field == SIGNATURE
            self.finished = not self.png
            self._expect("header", 8)
            return None
        if self._state == "header":
            length, kind = struct.unpack(">I4s", field)
            if length > MAX_LENGTH or not kind.isalpha():
                self.finished = True  # out of step: the decoder says what it makes of the rest
                return None
            self._kind, self._length, self._left = kind, length, length
            self._start = self.offset - 8
            self._crc = zlib.crc32(kind)
            self._expect("data" if length else "crc", 4)
            return None
        (crc,) = struct.unpack(">I", field)
        chunk = Chunk(self._kind, self._start, self._length, crc == self._crc)
        self.finished = self._kind == b"IEND"
        self._expect("header", 8)
        return chunk


def bad_ancillary_chunks(fp: IO[bytes]) -> list[Chunk]:
    """The ancillary chunks of ``fp`` whose CRC fails, read from its start in pieces (then rewound);
    ``media_invalid`` naming the first critical chunk whose CRC fails."""
    walker = ChunkWalker()
    bad: list[Chunk] = []
    fp.seek(0)
    while not walker.finished and (piece := fp.read(PIECE)):
        for chunk in walker.feed(piece):
            if chunk.crc_ok:
                continue
            if not chunk.ancillary:
                kind = chunk.kind.decode("ascii")
                raise MediaInvalid(
                    f"the PNG's critical {kind} chunk (at byte {chunk.start}) fails its CRC check"
                )
            bad.append(chunk)
            if len(bad) > MAX_DROPPED:
                raise MediaInvalid(f"the PNG has more than {MAX_DROPPED} chunks whose CRC check fails")
    fp.seek(0)
    return bad


def checked_png(fp: IO[bytes]) -> IO[bytes]:
    """``fp`` (seekable) as a decoder should read it: ``fp`` itself, rewound, when it is not a PNG or all its
    chunks check out; a read-only view of it without the ancillary chunks whose CRC fails; ``media_invalid``
    when a critical chunk's CRC fails. Bytes after ``IEND`` or after a chunk cut short are left as they
    are."""
    bad = bad_ancillary_chunks(fp)
    if not bad:
        return fp
    size = fp.seek(0, io.SEEK_END)
    fp.seek(0)
    return io.BufferedReader(_Without(fp, [(chunk.start, chunk.end) for chunk in bad], size), PIECE)


class _Without(io.RawIOBase):
    """``raw`` read as if the byte spans ``drop`` (sorted, disjoint) were not there; ``raw`` stays open."""

    def __init__(self, raw: IO[bytes], drop: list[tuple[int, int]], size: int) -> None:
        super().__init__()
        self._raw = raw
        self._starts: list[int] = []
        """Where each kept span starts in the view..."""
        self._spans: list[tuple[int, int]] = []
        """...and the span ``(start, end)`` in ``raw``."""
        position = view = 0
        for start, end in [*drop, (size, size)]:
            if start > position:
                self._starts.append(view)
                self._spans.append((position, start))
                view += start - position
            position = end
        self._size = view
        self._position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._size}[whence]
        if base + offset < 0:
            raise ValueError("negative seek position")
        self._position = base + offset
        return self._position

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        out = memoryview(buffer).cast("B")
        filled = 0
        while filled < len(out) and self._position < self._size:
            index = bisect_right(self._starts, self._position) - 1
            start, end = self._spans[index]
            at = start + self._position - self._starts[index]
            self._raw.seek(at)
            piece = self._raw.read(min(len(out) - filled, end - at))
            if not piece:
                break
            out[filled : filled + len(piece)] = piece
            filled += len(piece)
            self._position += len(piece)
        return filled

"""Verified range reads: every storage chunk a range touches is checked before any of its bytes leave.

Backends supply the raw chunks in order; this module aligns the range to storage chunks, compares each chunk's
XXH3-128 with the one recorded at write time and yields only the requested slice, so corruption becomes an
error, never wrong bytes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from blobstore.digests import xxh3_hex
from blobstore.errors import Corruption, InvalidRange
from blobstore.models import BlobInfo


def chunk_span(offset: int, length: int | None, size: int, chunk_size: int) -> tuple[int, int, int, int]:
    """The storage chunks that the byte range ``[offset, offset+length)`` touches.

    Returns ``(start, end, first_chunk, last_chunk)`` with the range clamped to ``size``; ``first_chunk >
    last_chunk`` when it is empty.
    """
    if offset < 0 or (length is not None and length < 0):
        raise InvalidRange()
    start = min(offset, size)
    end = size if length is None else min(size, offset + length)
    if end <= start:
        return start, start, 0, -1
    return start, end, start // chunk_size, (end - 1) // chunk_size


def chunk_length(blob: BlobInfo, index: int) -> int:
    return min(blob.chunk_size, blob.size - index * blob.chunk_size)


def check_chunk(blob: BlobInfo, index: int, data: bytes) -> None:
    # Only the chunk index goes into the error: never bytes, never the key (it contains the digest).
    if len(data) != chunk_length(blob, index) or xxh3_hex(data) != blob.chunk_xxh3[index]:
        raise Corruption(chunk=index)


ChunkSource = Callable[[int, int], AsyncIterator[bytes]]
"""Given ``(first_chunk, last_chunk)``, yield each whole storage chunk's bytes in order."""


async def read_verified(
    blob: BlobInfo, offset: int, length: int | None, source: ChunkSource
) -> AsyncIterator[bytes]:
    start, end, first, last = chunk_span(offset, length, blob.size, blob.chunk_size)
    if first > last:
        return
    expected_chunks = -(-blob.size // blob.chunk_size)
    if len(blob.chunk_xxh3) != expected_chunks:
        raise Corruption()
    index = first
    chunks = source(first, last)
    try:
        async for data in chunks:
            if index > last:
                break
            check_chunk(blob, index, data)
            base = index * blob.chunk_size
            yield data[max(start - base, 0) : min(end - base, len(data))]
            index += 1
    finally:
        aclose = getattr(chunks, "aclose", None)
        if aclose is not None:
            await aclose()
    if index <= last:
        # The object is shorter than its record says.
        raise Corruption(chunk=index)

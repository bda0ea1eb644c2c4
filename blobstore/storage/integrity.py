"""Verified range reads: every block a range touches is checked before any of its bytes leave.

Backends supply the raw blocks in order; this module aligns the range to blocks, compares each block's
XXH3-128 with the one recorded at write time and yields only the requested slice, so corruption becomes an
error, never wrong bytes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Protocol

from blobstore.digests import xxh3_hex
from blobstore.errors import Corruption, InvalidRange
from blobstore.models import BlobInfo


def block_span(offset: int, length: int | None, size: int, block_size: int) -> tuple[int, int, int, int]:
    """The blocks that the byte range ``[offset, offset+length)`` touches.

    Returns ``(start, end, first_block, last_block)`` with the range clamped to ``size``; ``first_block >
    last_block`` when it is empty.
    """
    if offset < 0 or (length is not None and length < 0):
        raise InvalidRange()
    start = min(offset, size)
    end = size if length is None else min(size, offset + length)
    if end <= start:
        return start, start, 0, -1
    return start, end, start // block_size, (end - 1) // block_size


def block_length(blob: BlobInfo, index: int) -> int:
    return min(blob.block_size, blob.size - index * blob.block_size)


def check_block(blob: BlobInfo, index: int, data: bytes) -> None:
    # Only the block index goes into the error: never bytes, never the key (it contains the digest).
    if len(data) != block_length(blob, index) or xxh3_hex(data) != blob.block_xxh3[index]:
        raise Corruption(chunk=index)


def _check_block_count(blob: BlobInfo) -> None:
    if len(blob.block_xxh3) != -(-blob.size // blob.block_size):
        raise Corruption()


BlockSource = Callable[[int, int], AsyncIterator[bytes]]
"""Given ``(first_block, last_block)``, yield each whole block's bytes in order."""


async def read_verified(
    blob: BlobInfo, offset: int, length: int | None, source: BlockSource
) -> AsyncIterator[bytes]:
    start, end, first, last = block_span(offset, length, blob.size, blob.block_size)
    if first > last:
        return
    _check_block_count(blob)
    index = first
    blocks = source(first, last)
    try:
        async for data in blocks:
            if index > last:
                break
            check_block(blob, index, data)
            base = index * blob.block_size
            yield data[max(start - base, 0) : min(end - base, len(data))]
            index += 1
    finally:
        aclose = getattr(blocks, "aclose", None)
        if aclose is not None:
            await aclose()
    if index <= last:
        # The object is shorter than its record says.
        raise Corruption(chunk=index)


class CheckedBlocks(Protocol):
    """Blocks of one object that were checked a moment ago, and a way to read a span of them alone."""

    def holds(self, index: int) -> bool: ...

    def add(self, index: int) -> None: ...

    def read_span(self, offset: int, length: int) -> bytes: ...


def read_verified_blocking(
    blob: BlobInfo,
    offset: int,
    length: int | None,
    read_block: Callable[[int], bytes],
    checked: CheckedBlocks | None = None,
) -> bytes:
    """The same checks as :func:`read_verified`, for a caller on a worker thread: ``read_block(index)``
    returns one whole block, and the verified slice of the range comes back in one piece.

    With ``checked``, a block it holds is read as the slice alone, and a block read whole and found sound is
    added to it (``blobstore.storage.verified_blocks`` says what that trusts)."""
    start, end, first, last = block_span(offset, length, blob.size, blob.block_size)
    if first > last:
        return b""
    _check_block_count(blob)
    parts: list[bytes] = []
    for index in range(first, last + 1):
        base = index * blob.block_size
        low, high = max(start - base, 0), min(end - base, block_length(blob, index))
        if checked is not None and checked.holds(index):
            data = checked.read_span(base + low, high - low)
            if len(data) != high - low:
                raise Corruption(chunk=index)
            parts.append(data)
            continue
        # A short block (the object is shorter than its record says) fails the length check here.
        data = read_block(index)
        check_block(blob, index, data)
        if checked is not None:
            checked.add(index)
        parts.append(data[low:high])
    return parts[0] if len(parts) == 1 else b"".join(parts)

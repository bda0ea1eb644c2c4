"""SHA-256 and XXH3-128 helpers, and a writer that hashes a stream while it passes through.

SHA-256 identifies content; XXH3-128 guards each fixed-size block so that a range read can verify only
the blocks it touches. XXH3 is never used as an address: it is not collision-resistant.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import xxhash

from blobstore.errors import (
    ChecksumMismatch,
    ChunkSizeInvalid,
    DigestMismatch,
    InvalidRequest,
    SizeMismatch,
    TooLarge,
)
from blobstore.hash_threads import hashed_alongside

DEFAULT_BLOCK_SIZE = 1024 * 1024
"""Bytes covered by one XXH3-128 integrity checksum (a *block*; upload chunks are a separate unit)."""
SHA256_PREFIX = "sha256:"

_HEX_LENGTHS = {"sha256": 64, "xxh3": 32}
_HEX = re.compile(r"[0-9a-f]+")


def sha256_hex(data: bytes | bytearray | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


def xxh3_hex(data: bytes | bytearray | memoryview) -> str:
    """XXH3-128 as 32 lower-case hex digits."""
    return xxhash.xxh3_128_hexdigest(data)


def is_hex_digest(value: object, length: int = 64) -> bool:
    """True for a string of exactly ``length`` lower-case hex digits."""
    return isinstance(value, str) and len(value) == length and _HEX.fullmatch(value) is not None


def normalize_sha256(value: str) -> str:
    """Accept ``sha256:<hex>`` or ``<hex>`` (any case); return the 64 lower-case hex digits."""
    if not isinstance(value, str):
        raise InvalidRequest("sha256 must be a string")
    text = value.strip()
    if text[: len(SHA256_PREFIX)].lower() == SHA256_PREFIX:
        text = text[len(SHA256_PREFIX) :]
    text = text.lower()
    if not is_hex_digest(text, _HEX_LENGTHS["sha256"]):
        raise InvalidRequest("sha256 must be 64 hex digits, optionally prefixed with 'sha256:'")
    return text


def normalize_xxh3(value: str) -> str:
    """Accept a 32-digit XXH3-128 hex string (any case); return it in lower case."""
    text = value.strip().lower() if isinstance(value, str) else ""
    if not is_hex_digest(text, _HEX_LENGTHS["xxh3"]):
        raise InvalidRequest("xxh3 must be 32 hex digits")
    return text


def check_running_size(size: int, *, expected_size: int | None, max_size: int | None) -> None:
    """Refuse a stream as soon as it grows past its limit or its declared size, before it is all received."""
    if max_size is not None and size > max_size:
        raise TooLarge(max_size=max_size)
    if expected_size is not None and size > expected_size:
        raise SizeMismatch(expected_size=expected_size)


@dataclass(frozen=True, slots=True)
class StreamDigest:
    """What a finished :class:`HashingWriter` knows about the bytes it saw."""

    size: int
    sha256: str
    block_size: int
    block_xxh3: tuple[str, ...]


class HashingWriter:
    """SHA-256 of the whole stream plus XXH3-128 of every ``block_size`` slice, fed incrementally.

    ``update`` refuses bytes past ``max_size`` (``TooLarge``) or past ``expected_size`` (``SizeMismatch``) so
    that an oversized stream is stopped early; ``finish`` checks the final size and digest claims.
    """

    def __init__(
        self,
        *,
        block_size: int = DEFAULT_BLOCK_SIZE,
        max_size: int | None = None,
        expected_size: int | None = None,
    ) -> None:
        if block_size <= 0:
            raise ValueError("block_size must be positive")
        self.block_size = block_size
        self.max_size = max_size
        self.expected_size = expected_size
        self.size = 0
        self._sha = hashlib.sha256()
        self._block = xxhash.xxh3_128()
        self._block_fill = 0
        self._blocks: list[str] = []

    def check_size(self, size: int) -> None:
        """Refuse a stream that has grown to ``size`` bytes, before they are hashed or stored."""
        check_running_size(size, expected_size=self.expected_size, max_size=self.max_size)

    def update(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data).cast("B")
        self.check_size(self.size + len(view))
        self._sha.update(view)
        self._update_blocks(view)
        self.size += len(view)

    @contextmanager
    def updating(self, data: bytes | bytearray | memoryview) -> Iterator[None]:
        """:meth:`update` with ``data`` while the ``with`` block runs (it may write the same bytes).

        The size limits are checked first, so a refused piece is neither hashed nor seen by the block.
        """
        view = memoryview(data).cast("B")
        self.check_size(self.size + len(view))
        with hashed_alongside(self._sha, view):
            self._update_blocks(view)
            self.size += len(view)
            yield

    def _update_blocks(self, view: memoryview) -> None:
        while view:
            take = min(len(view), self.block_size - self._block_fill)
            self._block.update(view[:take])
            self._block_fill += take
            view = view[take:]
            if self._block_fill == self.block_size:
                self._blocks.append(self._block.hexdigest())
                self._block.reset()
                self._block_fill = 0

    def continue_from(self, other: HashingWriter) -> None:
        """Go on from the state of ``other``, which saw the first bytes (checked against the limits)."""
        if other.block_size != self.block_size:
            raise ValueError("block sizes differ")
        self.check_size(other.size)
        self.size = other.size
        self._sha = other._sha.copy()
        self._block = other._block.copy()
        self._block_fill = other._block_fill
        self._blocks = list(other._blocks)

    def finish(self, *, expected_size: int | None = None, expected_sha256: str | None = None) -> StreamDigest:
        """Close the stream: check the declared size and digest, return the digests."""
        for claimed in (self.expected_size, expected_size):
            if claimed is not None and self.size != claimed:
                raise SizeMismatch(expected_size=claimed, size=self.size)
        digest = self._sha.hexdigest()
        if expected_sha256 is not None and digest != normalize_sha256(expected_sha256):
            raise DigestMismatch()
        blocks = list(self._blocks)
        if self._block_fill:
            blocks.append(self._block.hexdigest())
        return StreamDigest(self.size, digest, self.block_size, tuple(blocks))


@dataclass(frozen=True, slots=True)
class ChunkDigest:
    size: int
    sha256: str
    xxh3: str


class ChunkHasher:
    """SHA-256 and XXH3-128 of one upload chunk as a whole, with its length limits.

    Length failures are ``ChunkSizeInvalid`` and checksum failures ``ChecksumMismatch`` (raised by the caller
    through :meth:`finish`), since a chunk's claims are per request, not per artifact.
    """

    def __init__(self, *, expected_length: int | None = None, max_length: int | None = None) -> None:
        self.expected_length = expected_length
        self.max_length = max_length
        self.size = 0
        self._sha = hashlib.sha256()
        self._xxh = xxhash.xxh3_128()

    def check_size(self, size: int) -> None:
        """Refuse a chunk that has grown to ``size`` bytes, before they are hashed or stored."""
        if (self.max_length is not None and size > self.max_length) or (
            self.expected_length is not None and size > self.expected_length
        ):
            raise ChunkSizeInvalid()

    def update(self, data: bytes | bytearray | memoryview) -> None:
        size = self.size + len(data)
        self.check_size(size)
        self._sha.update(data)
        self._xxh.update(data)
        self.size = size

    @contextmanager
    def updating(self, data: bytes | bytearray | memoryview) -> Iterator[None]:
        """:meth:`update` with ``data`` while the ``with`` block runs (it may write the same bytes)."""
        size = self.size + len(data)
        self.check_size(size)
        with hashed_alongside(self._sha, data):
            self._xxh.update(data)
            self.size = size
            yield

    def finish(self, *, expected_sha256: str | None = None, expected_xxh3: str | None = None) -> ChunkDigest:
        if self.expected_length is not None and self.size != self.expected_length:
            raise ChunkSizeInvalid(expected_length=self.expected_length, length=self.size)
        result = ChunkDigest(self.size, self._sha.hexdigest(), self._xxh.hexdigest())
        if expected_sha256 is not None and result.sha256 != normalize_sha256(expected_sha256):
            raise ChecksumMismatch(algorithm="sha256")
        if expected_xxh3 is not None and result.xxh3 != normalize_xxh3(expected_xxh3):
            raise ChecksumMismatch(algorithm="xxh3")
        return result


class StagedCheck:
    """Length and XXH3-128 of a staged chunk read back to be joined, to compare with its receipt.

    No SHA-256 here: the receipt's XXH3 was recorded when the chunk arrived, which is enough to notice bytes
    that changed at rest, and the blob's own SHA-256, computed in the same pass, covers every byte against
    the declared digest.
    """

    def __init__(self) -> None:
        self.size = 0
        self._xxh = xxhash.xxh3_128()

    def update(self, data: bytes | bytearray | memoryview) -> None:
        self._xxh.update(data)
        self.size += len(data)

    def xxh3(self) -> str:
        return self._xxh.hexdigest()

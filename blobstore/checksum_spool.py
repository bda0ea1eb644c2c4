"""A request body held back until its checksum matched: spooled to a temporary file while hashed, then
replayed, so that memory stays flat and nothing unverified reaches storage (tus ``Upload-Checksum``)."""

from __future__ import annotations

import contextlib
import hashlib
import tempfile
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass
from typing import IO, Any

import anyio
import anyio.to_thread

from blobstore.errors import ChecksumMismatch, TooLarge

SPOOL_READ_SIZE = 256 * 1024


@dataclass(frozen=True, slots=True)
class BodyChecksum:
    algorithm: str
    """A :mod:`hashlib` name: ``sha1``, ``sha256``, ``sha512``."""
    digest: bytes


class ChecksumSpool:
    """Spools bodies on worker threads, at most ``threads`` file operations at a time."""

    def __init__(self, threads: int) -> None:
        self._limiter = anyio.CapacityLimiter(threads)

    @contextlib.asynccontextmanager
    async def verified(
        self, body: AsyncIterable[bytes], checksum: BodyChecksum, limit: int
    ) -> AsyncIterator[AsyncIterable[bytes]]:
        """The body, replayed from a temporary file once its checksum matched; memory stays flat."""
        spool: IO[bytes] = await anyio.to_thread.run_sync(tempfile.TemporaryFile, limiter=self._limiter)
        try:
            hasher = hashlib.new(checksum.algorithm)
            size = 0
            async for piece in body:
                size += len(piece)
                if size > limit:
                    raise TooLarge("the body runs past Upload-Length", max_size=limit)
                await anyio.to_thread.run_sync(_write_hashed, spool, hasher, piece, limiter=self._limiter)
            if hasher.digest() != checksum.digest:
                raise ChecksumMismatch(algorithm=checksum.algorithm)
            await anyio.to_thread.run_sync(spool.seek, 0, limiter=self._limiter)
            yield self._replay(spool)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(spool.close, limiter=self._limiter)

    async def _replay(self, spool: IO[bytes]) -> AsyncIterator[bytes]:
        while piece := await anyio.to_thread.run_sync(spool.read, SPOOL_READ_SIZE, limiter=self._limiter):
            yield piece


def _write_hashed(spool: IO[bytes], hasher: Any, piece: bytes) -> None:
    hasher.update(piece)
    spool.write(piece)

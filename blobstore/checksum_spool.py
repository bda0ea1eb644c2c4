"""A request body held back until its checksum matched: spooled to a temporary file while hashed, then
replayed, so that memory stays flat and nothing unverified reaches storage (tus ``Upload-Checksum``)."""

from __future__ import annotations

import contextlib
import hashlib
import tempfile
from collections.abc import AsyncIterable, AsyncIterator, Callable
from dataclasses import dataclass
from typing import IO, Any, TypeVar

import anyio
import anyio.to_thread

from blobstore.errors import ChecksumMismatch, TooLarge, from_os_error

SPOOL_READ_SIZE = 256 * 1024

T = TypeVar("T")


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
        spool: IO[bytes] = await self._run(tempfile.TemporaryFile)
        try:
            hasher = hashlib.new(checksum.algorithm)
            size = 0
            async for piece in body:
                size += len(piece)
                if size > limit:
                    raise TooLarge("the body runs past Upload-Length", max_size=limit)
                await self._run(_write_hashed, spool, hasher, piece)
            if hasher.digest() != checksum.digest:
                raise ChecksumMismatch(algorithm=checksum.algorithm)
            await self._run(spool.seek, 0)
            yield self._replay(spool)
        finally:
            with anyio.CancelScope(shield=True):
                await self._run(spool.close)

    async def _replay(self, spool: IO[bytes]) -> AsyncIterator[bytes]:
        while piece := await self._run(spool.read, SPOOL_READ_SIZE):
            yield piece

    async def _run(self, func: Callable[..., T], *args: Any) -> T:
        """One file operation on a worker thread. The spool lives in the system's temporary directory, outside
        the store's write path, so its ``OSError`` is mapped here: a full one is ``storage_full`` too."""
        try:
            return await anyio.to_thread.run_sync(func, *args, limiter=self._limiter)
        except OSError as exc:
            raise from_os_error(exc) from None


def _write_hashed(spool: IO[bytes], hasher: Any, piece: bytes) -> None:
    hasher.update(piece)
    spool.write(piece)

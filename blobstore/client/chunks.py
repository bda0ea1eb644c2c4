"""Blocking helpers for upload sources (run in worker threads) and parallel chunk sending."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from blobstore.client.api import BlobstoreApi
from blobstore.client.results import ProgressCallback
from blobstore.digests import xxh3_hex
from blobstore.errors import BlobstoreError, SizeMismatch

_HASH_BLOCK = 1024 * 1024

ChunkReader = Callable[[int], Awaitable[tuple[bytes, str]]]
"""Returns chunk ``index``'s bytes and their XXH3-128 (hex)."""


def chunk_count(size: int, chunk_size: int) -> int:
    return -(-size // chunk_size)


def chunk_length(index: int, size: int, chunk_size: int) -> int:
    return min(chunk_size, size - index * chunk_size)


def sha256_of_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(_HASH_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def read_exact(fd: int, offset: int, length: int) -> tuple[bytes, str]:
    """``length`` bytes at ``offset`` and their XXH3; a short read means the file shrank under us."""
    parts: list[bytes] = []
    got = 0
    while got < length:
        block = os.pread(fd, length - got, offset + got)
        if not block:
            raise SizeMismatch("the file shrank while it was being uploaded")
        parts.append(block)
        got += len(block)
    data = parts[0] if len(parts) == 1 else b"".join(parts)
    return data, xxh3_hex(data)


def slice_with_digest(data: memoryview, offset: int, length: int) -> tuple[bytes, str]:
    piece = bytes(data[offset : offset + length])
    return piece, xxh3_hex(piece)


class OrderedDigest:
    """The SHA-256 of content sent in chunks, hashed from the chunks as they are read, in index order.

    Chunks are read a few at a time, not always in order: one read before its predecessor waits here until
    that one arrives (about ``parallel`` chunks at most), so that no byte is read twice. One reader at a time
    does the hashing, in a worker thread; the others leave their chunk and go on sending.
    """

    def __init__(self, count: int, run: Callable[..., Awaitable[Any]]) -> None:
        self._count = count
        self._run = run
        self._next = 0
        self._waiting: dict[int, bytes] = {}
        self._busy = False
        self._sha = hashlib.sha256()

    async def add(self, index: int, data: bytes) -> None:
        if index >= self._next:
            self._waiting.setdefault(index, data)  # a chunk read again (a retry) is the same bytes
        if self._busy:
            return
        self._busy = True
        try:
            while (chunk := self._waiting.pop(self._next, None)) is not None:
                await self._run(self._sha.update, chunk)
                self._next += 1
        finally:
            self._busy = False

    def hexdigest(self) -> str:
        if self._next != self._count:
            raise RuntimeError(f"{self._count - self._next} chunks were not hashed")
        return self._sha.hexdigest()


class ProgressTracker:
    def __init__(self, callback: ProgressCallback | None, total: int, done: int = 0) -> None:
        self.callback = callback
        self.total = total
        self.done = done
        self.report()

    def advance(self, amount: int) -> None:
        self.done += amount
        self.report()

    def report(self) -> None:
        if self.callback is not None:
            self.callback(self.done, max(self.total, self.done))


class ChunkCounter:
    def __init__(self) -> None:
        self.chunks = 0
        self.bytes = 0


async def run_concurrently(tasks: list[Callable[[], Awaitable[None]]]) -> None:
    """Run ``tasks`` together; the first failure cancels the rest and is raised as itself.

    Task groups raise exception groups; callers of a transfer expect the catalogue error, so it is unwrapped
    here, and further failures that happened at the same time are attached as notes rather than dropped.
    """
    errors: list[BaseException] = []

    async def guarded(task: Callable[[], Awaitable[None]], scope: anyio.CancelScope) -> None:
        try:
            await task()
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:
            errors.append(exc)
            scope.cancel()

    async with anyio.create_task_group() as group:
        for task in tasks:
            group.start_soon(guarded, task, group.cancel_scope)
    if errors:
        first = errors[0]
        for other in errors[1:]:
            code = other.code if isinstance(other, BlobstoreError) else type(other).__name__
            first.add_note(f"another chunk failed at the same time ({code})")
        raise first


ChunkSender = Callable[[int, bytes, str], Awaitable[None]]
"""Sends chunk ``index``'s bytes (with their XXH3) wherever they go."""


@dataclass(frozen=True, slots=True)
class ChunkFeed:
    """How a send gets the chunks and accounts for them: ``read`` each one, up to ``parallel`` in flight,
    every chunk sent advancing ``progress`` and counted in ``counter``."""

    read: ChunkReader
    parallel: int
    progress: ProgressTracker
    counter: ChunkCounter


async def send_indexed(indexes: Iterable[int], feed: ChunkFeed, send: ChunkSender) -> None:
    """Send the given chunks with up to ``feed.parallel`` in flight; each is read only when a slot is free."""
    pending = iter(indexes)

    async def worker() -> None:
        for index in pending:
            data, digest = await feed.read(index)
            await send(index, data, digest)
            feed.counter.chunks += 1
            feed.counter.bytes += len(data)
            feed.progress.advance(len(data))

    await run_concurrently([worker] * max(1, feed.parallel))


async def send_indexed_chunks(
    api: BlobstoreApi, upload_id: str, indexes: Iterable[int], feed: ChunkFeed
) -> None:
    """PUT the given chunks to the API with up to ``feed.parallel`` in flight."""

    async def put(index: int, data: bytes, xxh3: str) -> None:
        await api.put_chunk(upload_id, index, data, xxh3=xxh3)

    await send_indexed(indexes, feed, put)

"""Local-disk backend.

Layout under the root (directories 0700, files 0600, set explicitly whatever the umask)::

    blobs/<ab>/<cd>/<sha256>.<suffix>   published generations, never modified
    tmp/<random>.part                   half-written puts and chunks, locked by their writer; swept when
                                        no live process holds the lock
    staging/<upload_id>/receipts        accepted chunks of an upload, and its chunk size
    staging/<upload_id>/data            its chunks, each written in place at index * chunk size
    staging/<upload_id>/sealed          the same file once a completion took it over

(``blobstore.storage.local_inplace`` explains the staging layout; an area made before it, one file per
chunk as ``staging/<upload_id>/<index>``, is still completed or aborted as it was written.
``blobstore.storage.local_files`` holds the file work the store and its in-place staging share.)

A write goes to an ``O_EXCL`` temp file in ``tmp/`` (same file system), is hashed while written, ``fsync``-ed,
published with a no-clobber hard link and made durable by ``fsync`` of the directory. A failed ``fsync`` fails
the write and is never retried: after a failed ``fsync`` the kernel may have dropped the dirty pages, and a
second ``fsync`` can report success for data that is gone.

Directory fsyncs are shared by concurrent writers (:mod:`blobstore.storage.dir_sync`): each waits for an
fsync of the directory that started after its own link or unlink. The 256 first-level fan-out directories are
created when the store opens; a second-level one is created on its first use, and remembered (one byte per
directory) so that later publishes into it need no ``mkdir`` and no fsync of its parent.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import os
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Final, TypeVar

import anyio

from blobstore.digests import ChunkHasher, HashingWriter, StagedCheck, StreamDigest
from blobstore.diskspace import check_free
from blobstore.errors import (
    ChunkConflict,
    InvalidRequest,
    NotFound,
    StorageUnavailable,
    UploadIncomplete,
    from_os_error,
)
from blobstore.models import BlobInfo, ChunkReceipt, StagingEntry, StoredObject
from blobstore.nowait import WouldBlock
from blobstore.storage.base import DEFAULT_BLOCK_SIZE, NOT_KEPT, Present
from blobstore.storage.dir_sync import DirectorySync
from blobstore.storage.integrity import block_length, read_verified, read_verified_blocking
from blobstore.storage.io_errors import mapped_os_errors, without_path
from blobstore.storage.join_ahead import JoinAheadTable
from blobstore.storage.keys import BLOB_DIR, is_generation_key, validate_key, validate_staging_ref
from blobstore.storage.local_files import TEMP_SUFFIX, LocalFiles, TempFile, mtime
from blobstore.storage.local_inplace import (
    InPlaceChunkSink,
    InPlaceCommitSink,
    InPlaceStaging,
    create_area,
    is_inplace_area,
)
from blobstore.storage.staging import check_staged
from blobstore.storage.verified_blocks import VerifiedBlocks, file_identity
from blobstore.storage.writes import BlobSink, ChunkSink, CommitSink, StagedWrites, blob_info

T = TypeVar("T")
_Pread = Callable[[int, int, int], bytes]
"""``(fd, length, offset)`` to the bytes there: a plain read, or one from the page cache alone."""

_COPY_PIECE = 1024 * 1024
_JOIN_PIECE = 4 * 1024 * 1024
"""Read size when a commit joins staged chunks: fewer system calls and hash calls per byte than 1 MiB."""


def _pread_full(fd: int, length: int, offset: int) -> bytes:
    parts: list[bytes] = []
    remaining = length
    while remaining > 0:
        part = os.pread(fd, remaining, offset + length - remaining)
        if not part:
            break
        parts.append(part)
        remaining -= len(part)
    return b"".join(parts)


_NOWAIT: Final = getattr(os, "RWF_NOWAIT", None)
"""``preadv2``'s flag for "only what is in the page cache" (Linux); None elsewhere, where nothing is read
on the event loop."""

_REFUSED: Final = frozenset({errno.EAGAIN, errno.EOPNOTSUPP, errno.ENOSYS})
"""Errors of an ``RWF_NOWAIT`` read that mean "not without waiting", or a file system (``EOPNOTSUPP``) or
kernel (``ENOSYS``: no ``preadv2``) that cannot say: the blocking read answers instead."""


def _pread_cached(fd: int, length: int, offset: int) -> bytes:
    """``length`` bytes at ``offset`` from the page cache, or WouldBlock.

    preadv2(2): "If this flag is specified, the preadv2() system call will return instantly if it would have
    to read data from the backing storage or wait for a lock. If some data was successfully read, it will
    return the number of bytes read." A short count is therefore no verdict on the file's length: the
    blocking read, which the caller falls back to, makes it.
    """
    if _NOWAIT is None:
        raise WouldBlock
    buffer = bytearray(length)
    try:
        got = os.preadv(fd, [buffer], offset, _NOWAIT)
    except OSError as exc:
        if exc.errno in _REFUSED:
            raise WouldBlock from None
        raise
    if got != length:
        raise WouldBlock
    return bytes(buffer)


def _pread_block(fd: int, blob: BlobInfo, index: int, pread: _Pread = _pread_full) -> bytes:
    return pread(fd, block_length(blob, index), index * blob.block_size)


def _open_blob(path: Path | str) -> int:
    try:
        return os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise NotFound() from None


class _CheckedFile:
    """The remembered blocks of one open blob file (``CheckedBlocks`` of ``read_verified_blocking``)."""

    __slots__ = ("_blob", "_fd", "_identity", "_pread", "_verified")

    def __init__(self, verified: VerifiedBlocks, fd: int, blob: BlobInfo, pread: _Pread) -> None:
        self._verified = verified
        self._fd = fd
        self._blob = blob
        self._pread = pread
        self._identity = file_identity(fd)

    def holds(self, index: int) -> bool:
        return self._verified.holds(self._identity, index, self._blob.block_xxh3[index])

    def add(self, index: int) -> None:
        self._verified.add(self._identity, index, self._blob.block_xxh3[index])

    def read_span(self, offset: int, length: int) -> bytes:
        return self._pread(self._fd, length, offset)


class LocalBlobStore(StagedWrites):
    kind = "local"

    def __init__(
        self,
        root: Path,
        *,
        block_size: int = DEFAULT_BLOCK_SIZE,
        io_threads: int = 8,
        directory_sync: DirectorySync | None = None,
        verified_block_seconds: float = 0,
    ) -> None:
        if not root.is_absolute():
            raise InvalidRequest("local storage root must be an absolute path")
        if block_size <= 0 or io_threads <= 0:
            raise InvalidRequest("block size and io threads must be positive")
        self.root = root
        # The read path joins it with each key as text: a pathlib join is a few % of a small range read.
        self._root_prefix = f"{root}/"
        self.block_size = block_size
        self._files = LocalFiles(root, io_threads=io_threads, directory_sync=directory_sync)
        self._run = self._files.run
        self._tmp = self._files.tmp
        self._staging = self._files.staging
        self.joins_ahead = JoinAheadTable()
        self._inplace = InPlaceStaging(self._files, self.joins_ahead, block_size)
        self.verified_blocks = VerifiedBlocks(verified_block_seconds)
        with mapped_os_errors():
            self._files.prepare_root()

    # -- writes ---------------------------------------------------------------------------------------------

    async def _blob_sink(self, claimed_sha256: str | None) -> BlobSink:
        return _TempSink(self)

    async def _commit_sink(
        self, staging_ref: str, chunks: Sequence[ChunkReceipt], size: int, claimed_sha256: str | None
    ) -> CommitSink:
        area = self._area(staging_ref)
        if await self._run(is_inplace_area, area):
            commit = InPlaceCommitSink(self._inplace, area)
            await _opening(commit, commit.open)
            return commit
        return await self._staging_sink(staging_ref)

    async def _chunk_sink(self, staging_ref: str, index: int) -> ChunkSink:
        chunk = InPlaceChunkSink(self._inplace, self._area(staging_ref), index)
        started = await _opening(chunk, functools.partial(self._run, chunk.start))
        if started is None:
            return await self._staging_sink(staging_ref)
        if not started:
            await _opening(chunk, chunk.open)
        return chunk

    async def _staging_sink(self, staging_ref: str) -> _StagingSink:
        area = self._area(staging_ref)
        await self._require_area(area)
        return _StagingSink(self, await self._run(TempFile, self._tmp), area)

    def _publish_blob(self, temp: TempFile, sha256: str) -> str:
        # The file stays open, and so locked against the temp sweep, until it is linked and discarded.
        os.fsync(temp.fileno())
        return self._files.publish(temp.path, sha256)

    # -- reads ----------------------------------------------------------------------------------------------

    def read(self, blob: BlobInfo, offset: int = 0, length: int | None = None) -> AsyncIterator[bytes]:
        path = self.local_path(blob)

        async def chunks(first: int, last: int) -> AsyncIterator[bytes]:
            # One thread hop per chunk, the open riding along with the first: for a small range (one chunk)
            # the thread round trip, not the 1 MiB pread, is what a request costs.
            fd, data = await self._run(self._open_and_read, path, blob, first)
            try:
                yield data
                for index in range(first + 1, last + 1):
                    yield await self._run(_pread_block, fd, blob, index)
            finally:
                os.close(fd)

        return read_verified(blob, offset, length, chunks)

    @staticmethod
    def _open_and_read(path: Path, blob: BlobInfo, index: int) -> tuple[int, bytes]:
        fd = _open_blob(path)
        try:
            return fd, _pread_block(fd, blob, index)
        except BaseException:
            os.close(fd)
            raise

    def read_blocking(self, blob: BlobInfo, offset: int, length: int) -> bytes:
        return self._read_verified(blob, offset, length, _pread_full)

    def read_cached(self, blob: BlobInfo, offset: int, length: int) -> bytes:
        if _NOWAIT is None:
            raise WouldBlock  # before the open: no platform flag, no read on the event loop
        return self._read_verified(blob, offset, length, _pread_cached)

    def _read_verified(self, blob: BlobInfo, offset: int, length: int, pread: _Pread) -> bytes:
        # No context manager on this path: it runs on the event loop for every cached range read.
        try:
            fd = _open_blob(self._root_prefix + validate_key(blob.key))
            try:
                verified = self.verified_blocks
                checked = _CheckedFile(verified, fd, blob, pread) if verified.enabled else None
                return read_verified_blocking(
                    blob, offset, length, lambda index: _pread_block(fd, blob, index, pread), checked
                )
            finally:
                os.close(fd)
        except OSError as exc:
            raise from_os_error(exc) from without_path(exc)

    def local_path(self, blob: BlobInfo) -> Path:
        return self.root / validate_key(blob.key)

    async def delete(self, key: str) -> None:
        path = self.root / validate_key(key)
        await self._run(self._files.unlink_durably, path)

    async def exists(self, key: str) -> bool:
        path = self.root / validate_key(key)
        return await self._run(path.is_file)

    async def iter_objects(self) -> AsyncIterator[StoredObject]:
        blob_dir = self.root / BLOB_DIR
        for first in await self._run(self._list_dirs, blob_dir):
            for second in await self._run(self._list_dirs, blob_dir / first):
                for name, stat in await self._run(self._list_files, blob_dir / first / second):
                    key = f"{BLOB_DIR}/{first}/{second}/{name}"
                    if is_generation_key(key):
                        yield StoredObject(key, stat.st_size, mtime(stat))

    @staticmethod
    def _list_dirs(path: Path) -> list[str]:
        try:
            with os.scandir(path) as entries:
                return sorted(e.name for e in entries if e.is_dir(follow_symlinks=False))
        except FileNotFoundError:
            return []

    @staticmethod
    def _list_files(path: Path) -> list[tuple[str, os.stat_result]]:
        found: list[tuple[str, os.stat_result]] = []
        try:
            with os.scandir(path) as entries:
                for entry in entries:
                    try:
                        if entry.is_file(follow_symlinks=False):
                            found.append((entry.name, entry.stat(follow_symlinks=False)))
                    except FileNotFoundError:
                        continue  # deleted while listing
        except FileNotFoundError:
            return []
        return sorted(found, key=lambda item: item[0])

    async def check(self) -> None:
        """Unavailable when the directories are not writable, full when their file system is (readiness)."""
        if not await self._run(self._is_writable):
            raise StorageUnavailable()
        await self._run(check_free, self.root)

    def _is_writable(self) -> bool:
        return all(os.access(path, os.W_OK | os.X_OK) for path in (self.root, self._tmp, self._staging))

    async def close(self) -> None:
        return None

    async def sweep_temp(self, older_than: datetime, *, abandoned_before: datetime | None = None) -> int:
        """Remove temp files untouched since ``abandoned_before`` (else ``older_than``) that no live process
        writes: a writer holds a lock on its file while it lives, so age alone never removes one in use."""
        cutoff = abandoned_before if abandoned_before is not None else older_than
        return await self._run(self._sweep_temp, cutoff.timestamp())

    def _sweep_temp(self, cutoff: float) -> int:
        removed = 0
        for name, stat in self._list_files(self._tmp):
            if (
                name.endswith(TEMP_SUFFIX)
                and stat.st_mtime < cutoff
                and self._remove_unlocked(self._tmp / name)
            ):
                removed += 1
        return removed

    @staticmethod
    def _remove_unlocked(path: Path) -> bool:
        """Unlink ``path`` unless a live process holds its lock; True when removed."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False  # its writer is alive
            # Under the lock, so a writer that created the file just now sees it unlinked and starts anew.
            path.unlink(missing_ok=True)
            return True
        finally:
            os.close(fd)

    # -- staging --------------------------------------------------------------------------------------------

    def _area(self, staging_ref: str) -> Path:
        return self._staging / validate_staging_ref(staging_ref)

    async def stage_begin(self, upload_id: str, *, chunk_size: int) -> str:
        if chunk_size <= 0:
            raise InvalidRequest("chunk size must be positive")
        await self._run(self._begin_area, self._area(upload_id), chunk_size)
        return upload_id

    def _begin_area(self, area: Path, chunk_size: int) -> None:
        self._files.make_dir(area)
        if not is_inplace_area(area):
            create_area(area, chunk_size)

    async def _require_area(self, area: Path) -> None:
        if not await self._run(area.is_dir):
            raise NotFound()

    def _publish_chunk(self, temp: TempFile, target: Path, receipt: ChunkReceipt) -> ChunkReceipt:
        os.fsync(temp.fileno())
        try:
            if self._files.link_durably(temp.path, target):
                return receipt
        except FileNotFoundError:
            raise NotFound() from None  # the area was aborted while the chunk streamed in
        existing = self._hash_file(target, receipt.index)
        if existing != receipt:
            raise ChunkConflict(index=receipt.index)
        return existing

    @staticmethod
    def _hash_file(path: Path, index: int) -> ChunkReceipt:
        hasher = ChunkHasher()
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            while piece := os.read(fd, _COPY_PIECE):
                hasher.update(piece)
        finally:
            os.close(fd)
        digest = hasher.finish()
        return ChunkReceipt(index, digest.size, digest.sha256, digest.xxh3)

    async def stage_abort(self, staging_ref: str) -> None:
        area = self._area(staging_ref)
        await self._run(self._remove_tree, area)

    @staticmethod
    def _remove_tree(path: Path) -> None:
        try:
            shutil.rmtree(path)
        except FileNotFoundError:
            return

    async def iter_staging(self) -> AsyncIterator[StagingEntry]:
        for name in await self._run(self._list_dirs, self._staging):
            try:
                area = self._area(name)
            except InvalidRequest:
                continue  # not ours: staging refs are validated on the way in
            stat = await self._run(self._stat_or_none, area)
            if stat is not None:
                yield StagingEntry(name, mtime(stat))

    @staticmethod
    def _stat_or_none(path: Path) -> os.stat_result | None:
        try:
            return os.stat(path, follow_symlinks=False)
        except FileNotFoundError:
            return None


async def _opening(sink: InPlaceChunkSink | InPlaceCommitSink, step: Callable[[], Awaitable[T]]) -> T:
    """Run a step of opening ``sink``; on failure release what it took (its descriptors, and so its lock)."""
    try:
        return await step()
    except BaseException:
        with anyio.CancelScope(shield=True):
            await sink.discard()
        raise


def _write_hashed(temp: TempFile, data: bytearray, hasher: HashingWriter | ChunkHasher) -> None:
    with hasher.updating(data):  # SHA-256 on a hashing thread while the bytes are written
        temp.append(data)


def _append_chunk(
    temp: TempFile, path: Path, receipt: ChunkReceipt, writer: HashingWriter, buffer: bytearray
) -> None:
    """Append one staged chunk, hashed for the blob and checked against its receipt from the same reads."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise UploadIncomplete(missing=[receipt.index]) from None
    check = StagedCheck()
    view = memoryview(buffer)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
        with open(fd, "rb", buffering=0, closefd=False) as source:
            while length := source.readinto(view):
                piece = view[:length]
                with writer.updating(piece):
                    check.update(piece)
                    temp.append(piece)
    finally:
        os.close(fd)
    check_staged(receipt, check.size, check.xxh3())


class _TempSink:
    """A temp file that becomes a blob: hard-linked under its generation key, then discarded.

    The file is created by the first worker-thread call that needs it and removed by the one that publishes
    it; a body that arrives in one batch is written, checked and published in a single call (one thread hop).
    """

    def __init__(self, store: LocalBlobStore, temp: TempFile | None = None) -> None:
        self.store = store
        self._temp = temp

    def _file(self) -> TempFile:
        if self._temp is None:
            self._temp = TempFile(self.store._tmp)
        return self._temp

    async def write(self, data: bytearray, hasher: HashingWriter | ChunkHasher) -> None:
        await self.store._run(self._write, data, hasher)

    def _write(self, data: bytearray, hasher: HashingWriter | ChunkHasher) -> None:
        _write_hashed(self._file(), data, hasher)

    async def publish(self, digest: StreamDigest) -> str:
        return await self.store._run(self._publish, digest.sha256)

    async def write_and_publish(
        self,
        data: bytearray,
        writer: HashingWriter,
        claimed_sha256: str | None,
        present: Present | None = None,
    ) -> BlobInfo:
        return await self.store._run(self._write_and_publish, data, writer, claimed_sha256, present)

    def _write_and_publish(
        self, data: bytearray, writer: HashingWriter, claimed_sha256: str | None, present: Present | None
    ) -> BlobInfo:
        # Hashed and checked before anything is written: a body the store already holds costs no file, no
        # fsync and no directory change (nor their undoing once the commit deduplicates onto the live copy).
        writer.update(data)
        # The claims are checked before anything becomes visible.
        digest = writer.finish(expected_sha256=claimed_sha256)
        if present is not None and present(digest):
            return blob_info(NOT_KEPT, digest)
        self._file().append(data)
        return blob_info(self._publish(digest.sha256), digest)

    def _publish(self, sha256: str) -> str:
        temp = self._file()
        key = self.store._publish_blob(temp, sha256)
        # The generation's link holds the bytes now: drop the temp name in the same thread call.
        temp.discard()
        return key

    async def discard(self) -> None:
        if self._temp is not None and not self._temp.removed:
            await self.store._run(self._temp.discard)


class _StagingSink(_TempSink):
    """A temp file in front of one staging area: the chunks a commit joins, or one chunk to keep there."""

    def __init__(self, store: LocalBlobStore, temp: TempFile, area: Path) -> None:
        super().__init__(store, temp)
        self.area = area
        self._join_buffer: bytearray | None = None

    async def append_staged(self, receipt: ChunkReceipt, writer: HashingWriter) -> None:
        # One buffer for every chunk of the commit (they are appended one after the other).
        if self._join_buffer is None:
            self._join_buffer = bytearray(_JOIN_PIECE)
        path = self.area / str(receipt.index)
        await self.store._run(_append_chunk, self._file(), path, receipt, writer, self._join_buffer)

    async def keep(self, receipt: ChunkReceipt) -> ChunkReceipt:
        return await self.store._run(
            self.store._publish_chunk, self._file(), self.area / str(receipt.index), receipt
        )

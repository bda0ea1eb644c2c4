"""Chunked uploads on local disk written in place: each byte is made durable once.

A staging area (``staging/<upload_id>/``) holds three files::

    receipts   a header (format, chunk size), then one fixed-size record per accepted chunk
    data       chunk ``i`` at offset ``i * chunk_size``, written in place and fsynced as it arrives
    sealed     the data file once a completion took it over: no chunk writer ever writes it again

A chunk is accepted when its record is durable in ``receipts``, after its bytes are durable in ``data``;
a chunk whose write or checksum failed leaves no record, and its retry writes over whatever it left. A
completion renames ``data`` to ``sealed``, hashes it and checks every chunk against its receipt, and
hard-links it under the generation key: there is no second copy. The hashing mostly happened already: each
writer, once its chunk is accepted, reads back and hashes the accepted chunks that continue the leading run
(``join_ahead``), so the completion only goes on from where that pass stopped.

Writers exclude each other with open-file-description (OFD) byte-range locks on ``receipts``: a chunk writer
locks its record's range, a completion the whole file. Every opener gets its own open file description, so
the locks exclude threads of one process as well as other server processes, and the kernel drops them when
their holder dies. A writer takes its lock before it looks at its record or opens ``data``, so of two ``PUT``s
of one index the second sees the first one's record, writes nothing and only compares its checksums (same
bytes: the same receipt; other bytes: ``ChunkConflict``). A completion seals ``data`` under the whole-file
lock, so no writer holds ``data`` open for writing from then on: a sealed file, which may already be a
published blob, is never written. Locks are only ever tried without blocking, the wait being an async sleep:
a blocked worker thread could starve the writer it waits for of the threads it needs to finish.

A writer that finds ``data`` gone (a completion sealed it, then failed after the fact) gets it back under the
whole-file lock: by rename when the sealed file is not a published blob, else by a copy.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio

from blobstore.digests import ChunkHasher, HashingWriter, StagedCheck, StreamDigest
from blobstore.errors import ChunkConflict, ChunkSizeInvalid, Corruption, NotFound, UploadIncomplete
from blobstore.models import ChunkReceipt
from blobstore.storage.dir_sync import fsync_dir
from blobstore.storage.join_ahead import JoinAhead, JoinAheadTable
from blobstore.storage.local_files import FILE_MODE, LocalFiles, open_new, pwrite_all
from blobstore.storage.staging import check_staged

RECEIPTS = "receipts"
DATA = "data"
SEALED = "sealed"
_RESTORING = "data.part"

_HEADER = struct.Struct("<8sQ48x")
_MAGIC = b"BSCHUNK1"
_RECORD = struct.Struct("<4sQ32s16sI")
_RECORD_MAGIC = b"CHK1"
HEADER_SIZE = _HEADER.size
RECORD_SIZE = _RECORD.size
_FLOCK = struct.Struct("hhqqi4x")
"""``struct flock`` on 64-bit Linux: type, whence, start, len, pid (0 for OFD locks), padding."""
_WHOLE = (0, 0)
"""Start and length of a lock over the whole file (length 0: to the end, however far it grows)."""
_READ_PIECE = 4 * 1024 * 1024
_FIRST_WAIT = 0.002
_LONGEST_WAIT = 0.05
_JOIN_PIECE = 1024 * 1024
"""The join's reads: small, since every worker thread's allocator keeps the largest buffer it has seen."""
_JOIN_BUDGET = 64 * 1024 * 1024
"""Bytes one accepted chunk joins at most: a chunk 0 sent last (a resumed upload) must not answer only once
the whole upload is hashed; the next writer, or the completion, goes on from there."""


@dataclass(frozen=True, slots=True)
class InPlaceStaging:
    """What the in-place sinks of one store share: its files, and the joins ahead of its uploads."""

    files: LocalFiles
    joins: JoinAheadTable
    block_size: int


def record_range(index: int) -> tuple[int, int]:
    return HEADER_SIZE + index * RECORD_SIZE, RECORD_SIZE


def _try_lock(fd: int, start: int, length: int) -> bool:
    try:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, start, length, 0))
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


def _unlock(fd: int, start: int, length: int) -> None:
    fcntl.fcntl(fd, fcntl.F_OFD_SETLK, _FLOCK.pack(fcntl.F_UNLCK, os.SEEK_SET, start, length, 0))


async def _lock(fd: int, start: int, length: int) -> None:
    wait = _FIRST_WAIT
    while not _try_lock(fd, start, length):
        await anyio.sleep(wait)
        wait = min(wait * 2, _LONGEST_WAIT)


def create_area(area: Path, chunk_size: int) -> None:
    """Create the files of a new staging area (the directory exists) and make them durable.

    ``receipts`` comes last and whole (by rename), so an area that has it has a valid header: a crash
    halfway leaves an area of no layout, which cleanup removes with its upload.
    """
    data = area / DATA
    data.unlink(missing_ok=True)
    os.close(open_new(data, os.O_WRONLY))
    part = area / f"{RECEIPTS}.part"
    part.unlink(missing_ok=True)
    fd = open_new(part, os.O_WRONLY)
    try:
        pwrite_all(fd, _HEADER.pack(_MAGIC, chunk_size), 0)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(part, area / RECEIPTS)
    fsync_dir(area)


def is_inplace_area(area: Path) -> bool:
    """True for an area of this layout; False for one staged chunk per file (written before it)."""
    return (area / RECEIPTS).is_file()


def _open_receipts(area: Path) -> tuple[int, int]:
    """The receipts file opened read-write (a new open file description) and the area's chunk size."""
    try:
        fd = os.open(area / RECEIPTS, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise NotFound() from None  # the area was aborted
    try:
        magic, chunk_size = _HEADER.unpack(os.pread(fd, HEADER_SIZE, 0))
        if magic != _MAGIC or chunk_size <= 0:
            raise OSError(errno.EIO, "staging receipts header is damaged")
    except BaseException:
        os.close(fd)
        raise
    return fd, chunk_size


def _read_record(fd: int, index: int) -> ChunkReceipt | None:
    """The accepted chunk ``index``, or None; a torn record (a crash while it was written) is not one."""
    start, length = record_range(index)
    raw = os.pread(fd, length, start)
    if len(raw) != length:
        return None
    magic, size, sha256, xxh3, crc = _RECORD.unpack(raw)
    if magic != _RECORD_MAGIC or crc != zlib.crc32(raw[: length - 4]):
        return None
    return ChunkReceipt(index, size, sha256.hex(), xxh3.hex())


def _write_record(fd: int, receipt: ChunkReceipt) -> None:
    sha256, xxh3 = bytes.fromhex(receipt.sha256), bytes.fromhex(receipt.xxh3)
    body = _RECORD.pack(_RECORD_MAGIC, receipt.size, sha256, xxh3, 0)[:-4]
    body += struct.pack("<I", zlib.crc32(body))
    pwrite_all(fd, body, record_range(receipt.index)[0])
    os.fsync(fd)


def read_records(area: Path) -> dict[int, ChunkReceipt]:
    """Every accepted chunk of ``area`` by index (for checks and tools; writers read only their own)."""
    fd, _ = _open_receipts(area)
    try:
        count = (os.fstat(fd).st_size - HEADER_SIZE) // RECORD_SIZE
        found = (_read_record(fd, index) for index in range(max(0, count)))
        return {receipt.index: receipt for receipt in found if receipt is not None}
    finally:
        os.close(fd)


def _close_all(*fds: int | None) -> None:
    try:
        if fds and fds[0] is not None:
            os.close(fds[0])
    finally:
        if fds[1:]:
            _close_all(*fds[1:])


def _restore_data(area: Path) -> None:
    """Give ``area`` a writable ``data`` again after a completion sealed it (under the whole-file lock)."""
    data, sealed = area / DATA, area / SEALED
    if data.exists():
        return
    try:
        links = os.stat(sealed, follow_symlinks=False).st_nlink
    except FileNotFoundError:
        os.close(open_new(data, os.O_WRONLY))
    else:
        if links == 1:
            os.rename(sealed, data)  # not published anywhere: writing it again harms nobody
        else:
            # Published as a blob (its completion failed after the link): blobs are never modified.
            part = area / _RESTORING
            part.unlink(missing_ok=True)
            shutil.copyfile(sealed, part, follow_symlinks=False)
            os.chmod(part, FILE_MODE)
            fd = os.open(part, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(part, data)
    fsync_dir(area)


def _join_chunk(
    fd: int, receipt: ChunkReceipt, chunk_size: int, writer: HashingWriter, buffer: bytearray
) -> None:
    """Hash the accepted chunk ``receipt`` names into ``writer``; ``Corruption`` if it is not its bytes."""
    offset = receipt.index * chunk_size
    check = StagedCheck()
    view = memoryview(buffer)
    remaining = receipt.size
    while remaining:
        length = os.preadv(fd, [view[: min(remaining, len(view))]], offset)
        if length == 0:
            break  # past the end of the file: the check below refuses the chunk
        piece = view[:length]
        writer.update(piece)
        check.update(piece)
        offset += length
        remaining -= length
    check_staged(receipt, check.size, check.xxh3())


def _join_key(area: Path, receipts: int) -> tuple[str, int]:
    # The inode too: an area of the same name made again later is another upload's.
    return str(area), os.fstat(receipts).st_ino


def _join_ahead(staging: InPlaceStaging, area: Path, receipts: int, data: int, chunk_size: int) -> None:
    """Join the chunks that now continue the area's leading run of accepted chunks (see ``join_ahead``).

    One thread at a time extends a join; a writer that finds it busy leaves ``pending`` set and returns, and
    the busy one goes round again, so a chunk accepted meanwhile is not left out.
    """
    join = staging.joins.get(_join_key(area, receipts), staging.block_size)
    join.pending = True
    while join.pending and join.lock.acquire(blocking=False):
        try:
            join.pending = False
            if not join.broken:
                _extend_join(join, receipts, data, chunk_size)
        finally:
            join.lock.release()


def _extend_join(join: JoinAhead, receipts: int, data: int, chunk_size: int) -> None:
    buffer: bytearray | None = None
    budget = _JOIN_BUDGET
    while budget > 0:
        try:
            receipt = _read_record(receipts, join.next_index)
            if receipt is None:
                return
            if receipt.size > chunk_size:
                raise Corruption(chunk=receipt.index)
            if buffer is None:
                buffer = bytearray(min(_JOIN_PIECE, chunk_size))
            _join_chunk(data, receipt, chunk_size, join.writer, buffer)
        except (OSError, Corruption):
            # The chunk is accepted and durable whatever this finds: the completion hashes these bytes
            # again from the start and meets the same failure there, where it is an error to report.
            join.broken = True
            return
        budget -= receipt.size
        join.receipts.append(receipt)
        if receipt.size < chunk_size:
            return  # a short chunk is the last one: nothing can follow it


class InPlaceChunkSink:
    """One chunk ``PUT`` into an in-place staging area: written at its offset, or only compared."""

    def __init__(self, staging: InPlaceStaging, area: Path, index: int) -> None:
        self.staging = staging
        self._run = staging.files.run
        self.area = area
        self.index = index
        self._receipts: int | None = None
        self._data: int | None = None
        self._lock: tuple[int, int] = record_range(index)
        self._chunk_size = 0
        self._existing: ChunkReceipt | None = None
        self._written = 0
        self._locked = False

    def start(self) -> bool | None:
        """Open the area, take the chunk's lock and prepare, in one worker call when nothing is in the way.

        None: the area is of the old layout (no receipts), this sink is not for it. True: opened. False: the
        lock is taken by another writer or the data file is sealed; :meth:`open` finishes the job.
        """
        if not is_inplace_area(self.area):
            return None
        self._receipts, self._chunk_size = _open_receipts(self.area)
        if not _try_lock(self._receipts, *self._lock):
            return False
        self._locked = True
        self._existing, self._data = self._prepare(False)
        return self._existing is not None or self._data is not None

    async def open(self) -> None:
        """Take the chunk's lock and decide: write in place, or compare with the chunk already accepted."""
        if self._receipts is None:
            self._receipts, self._chunk_size = await self._run(_open_receipts, self.area)
        receipts = self._receipts
        assert receipts is not None
        if not self._locked:
            await _lock(receipts, *self._lock)
            self._locked = True
            self._existing, self._data = await self._run(self._prepare, False)
        if self._existing is None and self._data is None:
            # A completion sealed the data file, and the upload is open again: restore it under the area lock.
            _unlock(receipts, *self._lock)
            self._lock = _WHOLE
            await _lock(receipts, *self._lock)
            self._existing, self._data = await self._run(self._prepare, True)

    def _prepare(self, restore: bool) -> tuple[ChunkReceipt | None, int | None]:
        assert self._receipts is not None
        existing = _read_record(self._receipts, self.index)
        if existing is not None:
            return existing, None
        if restore:
            try:
                _restore_data(self.area)
            except FileNotFoundError:
                raise NotFound() from None  # the area went away meanwhile: the upload was aborted
        try:
            # Read-write: the join ahead reads accepted chunks back through it.
            return None, os.open(self.area / DATA, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            if restore:
                raise NotFound() from None  # the area went away meanwhile: the upload was aborted
            return None, None

    async def write(self, data: bytearray, hasher: ChunkHasher) -> None:
        # Hashed in the worker thread with its write: hashing 1 MiB on the event loop held every other
        # request's receive back for the time of two digests.
        await self._run(self._write, data, hasher)

    def _write(self, data: bytearray, hasher: ChunkHasher) -> None:
        # `updating` refuses a chunk longer than it may be before anything is hashed or written.
        with hasher.updating(data):  # SHA-256 on a hashing thread while the bytes are written
            if self._existing is not None:
                return
            if self._written + len(data) > self._chunk_size:
                raise ChunkSizeInvalid()
            assert self._data is not None
            pwrite_all(self._data, data, self.index * self._chunk_size + self._written)
            self._written += len(data)

    async def keep(self, receipt: ChunkReceipt) -> ChunkReceipt:
        if self._existing is not None:
            if self._existing != receipt:
                raise ChunkConflict(index=self.index)
            return self._existing
        return await self._run(self._keep, receipt)

    def _keep(self, receipt: ChunkReceipt) -> ChunkReceipt:
        assert self._data is not None
        assert self._receipts is not None
        os.fsync(self._data)
        # An area aborted while the chunk streamed in is gone: say so rather than claim the chunk was kept.
        try:
            current = os.stat(self.area / RECEIPTS, follow_symlinks=False)
        except FileNotFoundError:
            raise NotFound() from None
        if current.st_ino != os.fstat(self._receipts).st_ino:
            raise NotFound()
        _write_record(self._receipts, receipt)
        _join_ahead(self.staging, self.area, self._receipts, self._data, self._chunk_size)
        self._close()  # done with the area: the discard that follows has nothing left to do
        return receipt

    async def discard(self) -> None:
        if self._data is not None or self._receipts is not None:
            await self._run(self._close)

    def _close(self) -> None:
        # Closing the receipts descriptor drops its lock: only after the record (if any) is durable.
        data, self._data = self._data, None
        receipts, self._receipts = self._receipts, None
        _close_all(data, receipts)


class InPlaceCommitSink:
    """A completion: seal the data file, hash it chunk by chunk against the receipts, link it as the blob."""

    def __init__(self, staging: InPlaceStaging, area: Path) -> None:
        self.staging = staging
        self._run = staging.files.run
        self.area = area
        self._receipts: int | None = None
        self._sealed: int | None = None
        self._chunk_size = 0
        self._size = 0
        self._buffer: bytearray | None = None

    async def open(self) -> None:
        receipts, self._chunk_size = await self._run(_open_receipts, self.area)
        self._receipts = receipts
        # Waits for chunk writers in flight; none starts until this sink is discarded.
        await _lock(receipts, *_WHOLE)
        self._sealed = await self._run(self._seal)

    def _seal(self) -> int:
        data, sealed = self.area / DATA, self.area / SEALED
        # A missing data file was sealed by an earlier completion that did not finish: it is still whole.
        # A present one replaces an older sealed file: it holds every chunk that one had.
        with contextlib.suppress(FileNotFoundError):
            os.rename(data, sealed)
        try:
            fd = os.open(sealed, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            raise NotFound() from None  # the area was aborted
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
        return fd

    async def append_staged(self, receipt: ChunkReceipt, writer: HashingWriter) -> None:
        if self._buffer is None:
            self._buffer = bytearray(min(_READ_PIECE, max(receipt.size, 1)))
        await self._run(self._append, receipt, writer, self._buffer)

    def _append(self, receipt: ChunkReceipt, writer: HashingWriter, buffer: bytearray) -> None:
        assert self._sealed is not None
        assert self._receipts is not None
        if receipt.size > self._chunk_size or _read_record(self._receipts, receipt.index) is None:
            raise UploadIncomplete(missing=[receipt.index])
        _join_chunk(self._sealed, receipt, self._chunk_size, writer, buffer)
        self._size = receipt.index * self._chunk_size + receipt.size

    async def joined_ahead(self, chunks: Sequence[ChunkReceipt]) -> tuple[int, HashingWriter] | None:
        return await self._run(self._joined_ahead, chunks)

    def _joined_ahead(self, chunks: Sequence[ChunkReceipt]) -> tuple[int, HashingWriter] | None:
        assert self._receipts is not None
        join = self.staging.joins.take(_join_key(self.area, self._receipts))
        if join is None:
            return None
        # Under the whole-file lock no chunk writer of this process is inside the join: this never waits.
        with join.lock:
            if not join.usable_for(chunks):
                return None
            self._size = join.writer.size
            return len(join.receipts), join.writer

    async def publish(self, digest: StreamDigest) -> str:
        return await self._run(self._publish, digest.sha256)

    def _publish(self, sha256: str) -> str:
        assert self._sealed is not None
        if os.fstat(self._sealed).st_size != self._size:
            # A failed write of the last chunk may have left bytes past the end.
            os.ftruncate(self._sealed, self._size)
            os.fsync(self._sealed)
        try:
            return self.staging.files.publish(self.area / SEALED, sha256)
        except FileNotFoundError:
            raise NotFound() from None  # the area was aborted while the completion read it

    async def discard(self) -> None:
        await self._run(self._close)

    def _close(self) -> None:
        sealed, self._sealed = self._sealed, None
        receipts, self._receipts = self._receipts, None
        _close_all(sealed, receipts)

"""The files of a local-disk store: its directories, temp files and durable, no-clobber publishes.

What the store (``local``) and its in-place staging (``local_inplace``) both do to the data directory lives
here, below both: blocking work runs in worker threads under one limit with every ``OSError`` translated
once (:mod:`blobstore.storage.io_errors`), directories are created 0700 and files 0600 whatever the umask,
and a new name is durable only once its directory has been fsynced after it was linked
(:mod:`blobstore.storage.dir_sync`).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from blobstore.errors import Conflict, StorageUnavailable
from blobstore.storage.dir_sync import DirectorySync
from blobstore.storage.io_errors import mapped_os_errors
from blobstore.storage.keys import BLOB_DIR, generation_key, random_suffix
from blobstore.storage.writeback import Writeback

T = TypeVar("T")

DIR_MODE = 0o700
FILE_MODE = 0o600
TEMP_DIR = "tmp"
STAGING_DIR = "staging"
TEMP_SUFFIX = ".part"
_PUBLISH_ATTEMPTS = 3
_FANOUT_FIRST = 256
_FANOUT_DIRS = 256 * 256
"""Second-level fan-out directories ``blobs/<ab>/<cd>``: too many (and 4 KiB each on ext4) to create ahead."""


def mtime(stat: os.stat_result) -> datetime:
    return datetime.fromtimestamp(stat.st_mtime, UTC)


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def pwrite_all(fd: int, data: bytes | bytearray | memoryview, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view = view[written:]
        offset += written


def open_new(path: Path, flags: int) -> int:
    """Create ``path`` (it must not exist) 0600 whatever the umask."""
    fd = os.open(path, flags | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


class TempFile:
    """An ``O_EXCL`` temp file in ``tmp/``; ``discard`` is idempotent and safe after a publish.

    The writer holds an exclusive ``flock`` on it until it is discarded, and the kernel drops that lock when
    the process dies: the temp sweep removes only files nobody holds (:meth:`LocalBlobStore.sweep_temp`).
    """

    def __init__(self, directory: Path) -> None:
        while True:
            self.path = directory / f"{random_suffix()}{TEMP_SUFFIX}"
            fd = open_new(self.path, os.O_WRONLY)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                if os.fstat(fd).st_nlink > 0:
                    break
            except BaseException:
                os.close(fd)
                raise
            # A sweep removed the file between its creation and the lock: take another name.
            os.close(fd)
        self.fd: int | None = fd
        self.removed = False
        self._writeback = Writeback(fd)

    def fileno(self) -> int:
        if self.fd is None:
            raise StorageUnavailable()
        return self.fd

    def append(self, data: bytes | bytearray | memoryview) -> None:
        """Write ``data`` at the end, its pages' writeback started every few MiB (the publish's fsync then
        has little left to write: :mod:`blobstore.storage.writeback`)."""
        write_all(self.fileno(), data)
        self._writeback.wrote(len(data))

    def close(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)

    def discard(self) -> None:
        try:
            self.close()
        finally:
            self.path.unlink(missing_ok=True)
            self.removed = True


class LocalFiles:
    """The root of one local store: worker threads, durable directories and publishes under it."""

    def __init__(self, root: Path, *, io_threads: int, directory_sync: DirectorySync | None = None) -> None:
        self.root = root
        self.tmp = root / TEMP_DIR
        self.staging = root / STAGING_DIR
        self._limiter = anyio.CapacityLimiter(io_threads)
        self._directories = directory_sync or DirectorySync()
        # One byte per fan-out directory, first and second level: set once it exists and its entry is durable.
        self._first_ready = bytearray(_FANOUT_FIRST)
        self._fanout_ready = bytearray(_FANOUT_DIRS)

    async def run(self, func: Callable[..., T], *args: Any) -> T:
        """``func(*args)`` in a worker thread; an ``OSError`` comes back as the catalogue's error."""
        with mapped_os_errors():
            return await anyio.to_thread.run_sync(func, *args, limiter=self._limiter)

    def prepare_root(self) -> None:
        self.root.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        os.chmod(self.root, DIR_MODE)
        for name in (BLOB_DIR, TEMP_DIR, STAGING_DIR):
            self.make_dir(self.root / name)
        # The first fan-out level, once: a data directory from before gets the missing ones here. One fsync
        # of blobs/ covers them all, those an earlier process created and may not have synced included.
        blob_dir = self.root / BLOB_DIR
        for first in range(_FANOUT_FIRST):
            self._create_dir(blob_dir / f"{first:02x}")
        self._directories.sync(blob_dir)
        self._first_ready[:] = b"\x01" * _FANOUT_FIRST

    @staticmethod
    def _create_dir(path: Path) -> bool:
        """``mkdir`` 0700 whatever the umask; False when it exists."""
        try:
            os.mkdir(path, DIR_MODE)
        except FileExistsError:
            return False
        os.chmod(path, DIR_MODE)
        return True

    def make_dir(self, path: Path, *, sync_existing: bool = False) -> None:
        """Create one directory 0700 and make its entry durable; an existing one is left as it is, and its
        entry synced only with ``sync_existing`` (whoever created it may not have synced it yet)."""
        if self._create_dir(path) or sync_existing:
            self._directories.sync(path.parent)

    def sync_dir(self, path: Path) -> None:
        self._directories.sync(path)

    def publish(self, source: Path, sha256: str) -> str:
        """Link the (fsynced) file ``source`` under a new generation key of ``sha256``, durably; the key.

        A ``FileNotFoundError`` that outlasts the attempts is raised as it is: the source is gone, or the
        fan-out directory keeps being removed.
        """
        missing: FileNotFoundError | None = None
        for _ in range(_PUBLISH_ATTEMPTS):
            key = generation_key(sha256)
            final = self.root / key
            fanout = int(sha256[:4], 16)
            if not self._fanout_ready[fanout]:
                # blobs/<ab>/<cd> exists and its entry, and its parent's, are durable. blobs/<ab> was made
                # durable when the store opened: a failing mkdir (and its exception) per new second-level
                # directory was a cost of every first upload into one.
                if not self._first_ready[fanout >> 8]:
                    self.make_dir(final.parent.parent)
                    self._first_ready[fanout >> 8] = 1
                self.make_dir(final.parent, sync_existing=True)
                self._fanout_ready[fanout] = 1
            try:
                if self.link_durably(source, final):
                    return key
            except FileNotFoundError as exc:
                # A fan-out directory was removed behind the store's back: create both levels again.
                self._first_ready[fanout >> 8] = 0
                self._fanout_ready[fanout] = 0
                missing = exc
        if missing is not None:
            raise missing
        # Random 128-bit suffixes never collide in practice; a clash means something else writes here.
        raise Conflict()

    def link_durably(self, source: Path, target: Path) -> bool:
        """No-clobber publish; False when ``target`` exists. A failed directory fsync unpublishes."""
        try:
            os.link(source, target)
        except FileExistsError:
            return False
        try:
            self._directories.sync(target.parent)
        except OSError:
            target.unlink(missing_ok=True)
            raise
        return True

    def unlink_durably(self, path: Path) -> None:
        try:
            path.unlink()
        except FileNotFoundError:
            return
        self._directories.sync(path.parent)

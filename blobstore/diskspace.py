"""Free space on a local file system: the readiness probe's notion of "full", and a reserve of space.

A full disk must not lock the store in: deleting an artifact or running cleanup writes to the SQLite database
(its write-ahead log grows by the pages a transaction changes) before any blob file is removed. The
:class:`SpaceReserve` is a file of a fixed size beside the database, allocated while there is room. When a
delete or a cleanup step finds the database out of space, the reserve is truncated, which hands its blocks
back to the file system for exactly that transaction; it is allocated again afterwards as far as room allows.
"""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

from blobstore.errors import StorageFull

logger = logging.getLogger("blobstore.diskspace")

MIN_FREE_BYTES = 1024 * 1024
"""Below this much free space a file system counts as full: not even one block fits."""

RESERVE_FILE_NAME = "disk.reserve"
_ALLOCATE_STEP = 256 * 1024
_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})


def free_bytes(path: Path) -> int:
    """Bytes an unprivileged writer can still allocate on the file system holding ``path``."""
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize


def check_free(path: Path) -> None:
    """Raise :class:`StorageFull` when the file system holding ``path`` has less than ``MIN_FREE_BYTES``."""
    if free_bytes(path) < MIN_FREE_BYTES:
        raise StorageFull("the file system of the data directory is full")


class SpaceReserve:
    """A file of allocated bytes at ``path``, released to let a space-freeing write through.

    The ``owner`` (the server) creates it and keeps it at ``size``. Another process (an admin command such
    as ``cleanup``) only releases it when it must, and afterwards allocates again what it released, so a
    different setting in that process never resizes the server's reserve.
    """

    def __init__(self, path: Path, size: int, *, owner: bool) -> None:
        self.path = path
        self.size = size
        self.owner = owner
        self._owed = 0

    def ensure(self) -> bool:
        """Allocate the reserve up to its target as far as there is room; True when it is whole."""
        target = self.size if self.owner else self._owed
        if target <= 0:
            return True
        flags = os.O_WRONLY | os.O_CLOEXEC | os.O_NOFOLLOW | (os.O_CREAT if self.owner else 0)
        try:
            fd = os.open(self.path, flags, 0o600)
        except FileNotFoundError:
            return False
        try:
            current = os.fstat(fd).st_size
            while current < target:
                step = min(_ALLOCATE_STEP, target - current)
                try:
                    os.posix_fallocate(fd, current, step)
                except OSError as exc:
                    if exc.errno in _FULL:
                        return False
                    raise
                current += step
        finally:
            os.close(fd)
        self._owed = 0
        return True

    def release_if_full(self) -> int:
        """Release the reserve when its file system is full, so that a process can open its SQLite database
        there at all (the write-ahead log and its index are created on first use); the bytes released."""
        try:
            if free_bytes(self.path.parent) >= MIN_FREE_BYTES:
                return 0
        except FileNotFoundError:
            return 0
        released = self.release()
        if released:
            logger.warning(
                "the data directory is full: released the %d-byte disk reserve to open it", released
            )
        return released

    def release(self) -> int:
        """Hand the reserve's space back to the file system; the bytes released (0 when there were none)."""
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except FileNotFoundError:
            return 0
        try:
            held = os.fstat(fd).st_size
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)
        self._owed = max(self._owed, held)
        return held

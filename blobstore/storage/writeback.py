"""Starting the disk's writeback of a file's pages while the file is still being written.

A new blob is fsynced before it is published. Written whole and then fsynced, all of its pages go to the disk
in that one ``fsync``, after its last byte arrived: for a large upload, the longest wait between the last
byte and the answer. ``sync_file_range(SYNC_FILE_RANGE_WRITE)`` (Linux) starts the writeback of a range of
a file and returns without waiting for it, so the disk writes while the rest of the body arrives and is
hashed, and the final ``fsync`` has little left to do. PostgreSQL (``backend_flush_after``) and RocksDB
(``bytes_per_sync``) do the same for the same reason.

It is a hint about timing, not about durability: the ``fsync`` still decides what is durable and reports
any write error. So where the call does not exist (not Linux, no such libc symbol) or a file system refuses
it, nothing changes but when the pages are written, and the call is not tried again in this process.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from typing import Final

STEP: Final = 8 * 1024 * 1024
"""Bytes written between two starts of writeback: large enough that the calls cost nothing next to the
writes, small enough that the disk starts early."""

_SYNC_FILE_RANGE_WRITE: Final = 2
"""``SYNC_FILE_RANGE_WRITE`` of ``<fcntl.h>``: start writing the range's dirty pages, do not wait."""

_refused: list[bool] = []


@functools.cache
def _sync_file_range() -> Callable[[int, int, int, int], int] | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        call = libc.sync_file_range
    except (OSError, AttributeError):
        return None
    call.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    call.restype = ctypes.c_int
    return call


def start_writeback(fd: int, offset: int, length: int) -> bool:
    """Start writing ``length`` bytes of ``fd`` from ``offset`` to the disk, without waiting; whether the
    kernel took the hint."""
    call = _sync_file_range()
    if call is None or _refused or length <= 0:
        return False
    if call(fd, offset, length, _SYNC_FILE_RANGE_WRITE) == 0:
        return True
    # EINVAL (a file system without it), ESPIPE (not a file): the final fsync does all the writing, as
    # without this module; an error of the file itself, the writes and that fsync meet too, and report.
    _refused.append(True)
    return False


class Writeback:
    """Counts the bytes appended to one file and starts their writeback every :data:`STEP` bytes."""

    __slots__ = ("_fd", "_started", "_written")

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._written = 0
        self._started = 0

    def wrote(self, size: int) -> None:
        self._written += size
        if self._written - self._started >= STEP:
            start_writeback(self._fd, self._started, self._written - self._started)
            self._started = self._written

"""Blocks of local blob files checked against their XXH3 a moment ago, so that a read of a few KiB inside one
does not read and hash the whole block again.

A 64 KiB range costs a 1 MiB ``pread`` and its XXH3 when every read checks the whole block it touches; most of
that is the copy out of the page cache. A block that a read checked is remembered for ``seconds`` under the
file's identity (device, inode, size, modification and change times) and the digest it matched; a read in
that time reads only the bytes it answers. Any write to the file changes its change time (which no program
can set back), a replaced file is another inode, and the digest is part of the key, so what a remembered
block can miss is corruption below the file system (the disk's own, with the page not cached) within those
seconds, or a write to the published file (which the store never makes) racing the read itself: the next
check after them, or ``blobstore verify``, finds it. ``seconds <= 0`` checks every block of every read.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

FileIdentity = tuple[int, int, int, int, int]
"""``(st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns)`` of one open blob file."""

DEFAULT_CAPACITY = 4096
"""Blocks remembered at most (4 GiB of 1 MiB blocks, about 2 MiB of memory); least recently used go first."""


def file_identity(fd: int) -> FileIdentity:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


class VerifiedBlocks:
    """Which blocks were checked in the last ``seconds``; shared by the store's worker threads."""

    def __init__(
        self,
        seconds: float,
        *,
        capacity: int = DEFAULT_CAPACITY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.seconds = seconds
        self.capacity = capacity
        self._clock = clock
        self._checked: OrderedDict[tuple[FileIdentity, int, str], float] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.seconds > 0 and self.capacity > 0

    def holds(self, identity: FileIdentity, index: int, digest: str) -> bool:
        """True if block ``index`` of this file matched ``digest`` less than ``seconds`` ago."""
        key = (identity, index, digest)
        with self._lock:
            checked = self._checked.get(key)
            if checked is None:
                return False
            if self._clock() - checked >= self.seconds:
                del self._checked[key]
                return False
            self._checked.move_to_end(key)
            return True

    def add(self, identity: FileIdentity, index: int, digest: str) -> None:
        """Block ``index`` of this file was just read whole and matched ``digest``."""
        key = (identity, index, digest)
        with self._lock:
            self._checked[key] = self._clock()
            self._checked.move_to_end(key)
            while len(self._checked) > self.capacity:
                self._checked.popitem(last=False)

    def __len__(self) -> int:
        return len(self._checked)

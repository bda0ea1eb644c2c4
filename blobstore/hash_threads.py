"""SHA-256 of a large piece run on a second core while the caller does the rest of that piece's work.

Writing a new blob is one pass per piece: SHA-256, XXH3 of its blocks, ``write``. SHA-256 alone takes about
twice as long as the other two together, and ``hashlib`` releases the GIL while it hashes, so running it on
a hashing thread while the writing thread checks the blocks and writes the same bytes makes the piece cost
about its SHA-256 instead of the sum. Small pieces are hashed in line: a hand-over costs more than they do.

The digests do not change: each hasher still sees its pieces in order, one at a time, because every piece's
SHA-256 is finished before the caller's next piece starts.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from typing import Protocol

ALONGSIDE_MIN = 256 * 1024
"""Pieces shorter than this are hashed in the caller's thread."""
HASHING_THREADS = 4
"""Hashing threads per process; more would only share the same cores among more uploads."""


class Updatable(Protocol):
    def update(self, data: bytes | bytearray | memoryview, /) -> None: ...


class _Pool:
    """The process's hashing threads, made on first use in each process (a forked worker makes its own)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = 0
        self._executor: ThreadPoolExecutor | None = None

    def get(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None or self._pid != os.getpid():
                # After a fork the parent's threads do not exist here: the inherited executor is dropped.
                self._executor = ThreadPoolExecutor(HASHING_THREADS, thread_name_prefix="blobstore-sha256")
                self._pid = os.getpid()
            return self._executor


_POOL = _Pool()


@contextmanager
def hashed_alongside(hasher: Updatable, data: bytes | bytearray | memoryview) -> Iterator[None]:
    """Feed ``data`` to ``hasher`` while the ``with`` block runs; both are done when the block is left.

    ``data`` must not change until then (the block may read it). An error of the block is raised after the
    hash is finished, so ``hasher`` is never updated by a thread that outlives the call.
    """
    if len(data) < ALONGSIDE_MIN:
        hasher.update(data)
        yield
        return
    future: Future[None] = _POOL.get().submit(hasher.update, data)
    try:
        yield
    finally:
        wait((future,))
    future.result()

"""Reads that never wait, so that the event loop can do a small read itself.

A small range read costs more in handing it to a worker thread and back (a thread woken each way, and the
futex waits of both) than in the read. When everything it needs is already in memory, the event loop does
it in place: the blob's bytes come from the page cache through ``preadv2`` with ``RWF_NOWAIT``, which
returns at once instead of waiting for the disk, and the lookup runs on a SQLite connection that fails at
once instead of waiting for a lock. Either refusal raises :class:`WouldBlock`, and the caller does the whole
read again on a worker thread, where waiting is allowed.

What is not covered: opening the blob file and SQLite's own reads of its database pages are plain blocking
calls. Both normally come from the kernel's caches (directory entries, the database's hot pages); where
they do not (a metadata database larger than memory, storage that stalls), ``BLOBSTORE_INLINE_READS=false``
sends every read to the worker threads.
"""

from __future__ import annotations


class WouldBlock(Exception):
    """A read that would have had to wait (for the disk, for a lock): do it again where waiting is allowed."""

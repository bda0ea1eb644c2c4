"""Joining an upload's chunks while they arrive, so that its completion has little or nothing left to hash.

A completion hashes every byte of the artifact (SHA-256 of the whole, XXH3-128 of every integrity block) and
checks every chunk against its receipt: for a large artifact that one serial pass is most of the time between
the last chunk and the answer. Chunks mostly arrive in order, so a process can run the same pass over the
leading run of accepted chunks as they are accepted, in the worker threads that accept them, while later
chunks are still on the wire. The completion then continues from where that pass stopped.

The state is an optimisation only: it lives in the memory of one process, is bounded in number, and may be
missing or stop short (another process accepted the next chunk and this one never saw its record, or the
state was evicted). The completion uses it only when every chunk it joined has the receipt the completion
was given, and otherwise hashes from the start: the result is the same bytes either way.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

from blobstore.digests import HashingWriter
from blobstore.models import ChunkReceipt

MAX_OPEN_JOINS = 64
"""Uploads joined ahead at once per process; the least recently advanced one beyond that is forgotten."""


@dataclass(eq=False)
class JoinAhead:
    """The pass over the leading accepted chunks of one staging area: chunks ``0 .. len(receipts) - 1``."""

    writer: HashingWriter
    receipts: list[ChunkReceipt] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    pending: bool = False
    """Set by a writer that accepted a chunk while another thread held ``lock``: that thread goes on."""
    broken: bool = False
    """A read or check failed: the completion must not use this pass (it will meet the failure itself)."""

    @property
    def next_index(self) -> int:
        return len(self.receipts)

    def usable_for(self, chunks: Sequence[ChunkReceipt]) -> bool:
        """True when this pass joined exactly the first chunks of ``chunks``, with the same receipts."""
        count = len(self.receipts)
        return not self.broken and 0 < count <= len(chunks) and list(chunks[:count]) == self.receipts


class JoinAheadTable:
    """The passes of one process, by staging area; thread-safe, least recently used evicted first."""

    def __init__(self, limit: int = MAX_OPEN_JOINS) -> None:
        self._limit = limit
        self._joins: OrderedDict[tuple[str, int], JoinAhead] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._joins)

    def get(self, key: tuple[str, int], block_size: int) -> JoinAhead:
        """The pass for ``key`` (an area's path and its receipts file's inode), started when there is none."""
        with self._lock:
            join = self._joins.get(key)
            if join is None:
                join = self._joins[key] = JoinAhead(HashingWriter(block_size=block_size))
                while len(self._joins) > self._limit:
                    self._joins.popitem(last=False)
            else:
                self._joins.move_to_end(key)
            return join

    def take(self, key: tuple[str, int]) -> JoinAhead | None:
        """Remove and return the pass for ``key``: a completion owns it from then on."""
        with self._lock:
            return self._joins.pop(key, None)

"""New request ids: 16 random bytes from the system's generator, as hex, read 256 ids at a time.

``secrets.token_hex(16)`` reads 16 bytes with one ``getrandom`` call per id. On the request path that call
also lets go of the GIL, which a busy server's I/O threads are waiting for, so each one could cost a hand-over
of the GIL and back. Reading 4 KiB at once gives the same bytes from the same source. A forked child starts
with no ids of its own, so it never repeats its parent's.
"""

from __future__ import annotations

import os
from typing import Final

ID_BYTES: Final = 16
PER_READ: Final = 256


class RequestIds:
    """Unique, unpredictable ids (32 hex characters); safe to share between threads."""

    def __init__(self) -> None:
        self._ids: list[str] = []
        os.register_at_fork(after_in_child=self._ids.clear)

    def new(self) -> str:
        try:
            return self._ids.pop()  # one atomic step: no two threads get the same id
        except IndexError:
            text = os.urandom(ID_BYTES * PER_READ).hex()
            width = 2 * ID_BYTES
            fresh = [text[start : start + width] for start in range(0, len(text), width)]
            self._ids.extend(fresh[1:])
            return fresh[0]

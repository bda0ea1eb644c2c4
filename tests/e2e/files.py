"""Large test files made quickly: one random MiB repeated, each copy stamped with its index."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

MiB = 1024 * 1024


def write_distinct_blocks(path: Path, size_mib: int) -> str:
    """Write ``size_mib`` MiB and return their SHA-256; a counter per MiB keeps every block distinct, so a
    misplaced range or chunk cannot go unnoticed."""
    block = os.urandom(MiB)
    digest = hashlib.sha256()
    with path.open("wb") as out:
        for i in range(size_mib):
            piece = i.to_bytes(8, "big") + block[8:]
            out.write(piece)
            digest.update(piece)
    return digest.hexdigest()


def sha256_file(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()

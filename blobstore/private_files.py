"""Small private files written atomically: a JSON header line, then the bytes (directories 0700, files 0600).

What a local cache of derived products keeps
(:class:`mcp_resources.results.renditions.DirectoryRenditionStore`).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_private(path: Path, header: bytes, data: bytes) -> None:
    """``header`` line and ``data`` into ``path`` atomically (directories 0700, file 0600, fsynced)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(header + b"\n" + data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_private(path: Path) -> tuple[dict[str, Any], bytes] | None:
    """The header and bytes :func:`write_private` wrote, or None when there is no such file."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    header, _, data = raw.partition(b"\n")
    return json.loads(header), data

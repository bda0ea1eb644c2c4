"""Reading a resource to a file through ``resources/read``, in windows where the server reads in windows, and
checking it against its SHA-256.

A ``resource_link`` of this store carries, under ``_meta["dev.blobstore/artifact"]``, the artifact's
``sha256``, its ``rangeTemplate`` (``…{?offset,length}``) and ``maxWindow``: the reads start with the first
window and follow each answer's ``_meta["dev.blobstore/window"].next`` to the end (docs/mcp.md, "Reading: the
window rules"). Any other resource is read whole; a server that answers ``range_required`` with the first
window to read (as this store does for a whole read over its inline limit) is read in windows from there.
Every window goes to the file as it arrives, so memory holds one window whatever the size.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from mcp import Client
from mcp.shared.exceptions import MCPError

from blobstore.cli.tester.blocks import FileExists, decode_base64, new_file
from blobstore.cli.tester.target import CommandFailure, mcp_error_line
from blobstore.links import ARTIFACT_META_KEY, META_PREFIX

WINDOW_META_KEY: Final = f"{META_PREFIX}/window"
QUERY_TEMPLATE: Final = "{?offset,length}"

ProgressUpdate = Callable[[int, int], None]


@dataclass(frozen=True)
class Fetched:
    path: Path
    size: int
    sha256: str
    expected_sha256: str | None
    reads: int
    mime_type: str | None

    @property
    def verified(self) -> bool:
        return self.expected_sha256 is not None and self.expected_sha256 == self.sha256

    def as_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "bytes": self.size,
            "sha256": self.sha256,
            "verified": self.verified,
            "reads": self.reads,
            "mimeType": self.mime_type,
        }


def link_window(block: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """``(first window URI, sha256)`` from a link's ``_meta`` (either None when it does not say)."""
    meta = (block.get("_meta") or {}).get(ARTIFACT_META_KEY) or {}
    sha256 = meta.get("sha256") if isinstance(meta.get("sha256"), str) else None
    template, window = meta.get("rangeTemplate"), meta.get("maxWindow")
    if not (isinstance(template, str) and template.endswith(QUERY_TEMPLATE) and isinstance(window, int)):
        return None, sha256
    size = block.get("size")
    length = min(window, size) if isinstance(size, int) and size > 0 else window
    return f"{template.removesuffix(QUERY_TEMPLATE)}?offset=0&length={max(length, 1)}", sha256


def _bytes_of(item: Any, uri: str) -> bytes:
    text = getattr(item, "text", None)
    if isinstance(text, str):
        return text.encode("utf-8")
    blob = getattr(item, "blob", None)
    raw, invalid_at = decode_base64(blob if isinstance(blob, str) else "")
    if raw is None:
        raise CommandFailure(f"{uri}: the blob is not valid base64 (from character {invalid_at} on)")
    return raw


async def _read(client: Client, uri: str) -> Any:
    result = await client.read_resource(uri)
    if not result.contents:
        raise CommandFailure(f"{uri}: the server answered resources/read with no contents")
    return result.contents[0]


async def read_to_file(
    client: Client,
    uri: str,
    path_for: Callable[[str | None], Path],
    *,
    force: bool,
    first_window: str | None = None,
    expected_sha256: str | None = None,
    progress: ProgressUpdate | None = None,
) -> Fetched:
    """Read ``uri`` (from ``first_window`` when the link names one) into the file ``path_for`` names once the
    first answer gave the MIME type. A SHA-256 that the link or the windows state and the bytes do not match
    is an error, and nothing is left at that path."""
    start = first_window or uri
    try:
        item = await _read(client, start)
    except MCPError as exc:
        data = exc.data if isinstance(exc.data, dict) else {}
        first = data.get("first")
        if data.get("reason") != "range_required" or not isinstance(first, str):
            raise CommandFailure(f"resources/read {start}: {mcp_error_line(exc)}") from None
        item = await _read(client, first)
    mime = getattr(item, "mime_type", None)
    mime = mime if isinstance(mime, str) and mime else None
    path = path_for(mime)
    digest = hashlib.sha256()
    written = reads = 0
    expected = expected_sha256
    try:
        with new_file(path, force=force) as out:
            while True:
                reads += 1
                chunk = _bytes_of(item, uri)
                out.write(chunk)
                digest.update(chunk)
                written += len(chunk)
                window = (getattr(item, "meta", None) or {}).get(WINDOW_META_KEY) or {}
                if expected is None and isinstance(window.get("sha256"), str):
                    expected = window["sha256"]
                if progress is not None and isinstance(window.get("size"), int):
                    progress(written, window["size"])
                following = window.get("next")
                if not isinstance(following, str) or not chunk:
                    break
                try:
                    item = await _read(client, following)
                except MCPError as exc:
                    raise CommandFailure(f"resources/read {following}: {mcp_error_line(exc)}") from None
            sha256 = digest.hexdigest()
            if expected is not None and expected != sha256:
                raise CommandFailure(
                    f"the {written:,} bytes read have SHA-256 {sha256}, not the {expected} the server "
                    "stated; nothing was kept"
                )
    except FileExists as exc:
        raise CommandFailure(f"not saved: {exc}") from None
    return Fetched(path, written, sha256, expected, reads, mime)

"""How the console shows an artifact: its preview kind, sizes and ages in words, hex head, curl line."""

from __future__ import annotations

import json
import shlex
from datetime import datetime
from typing import Any, Final

from blobstore.api.console.thumbnails import DECODABLE
from blobstore.links import resource_link
from blobstore.models import Artifact
from blobstore.units import human_bytes
from blobstore.views.kind import kind_of

TEXT_HEAD: Final = 16 * 1024
HEX_HEAD: Final = 512
_TEXT_TYPES: Final = frozenset(
    {"application/json", "application/xml", "application/javascript", "application/x-ndjson", "image/svg+xml"}
)


def preview_kind(artifact: Artifact) -> str:
    """``image``, ``audio``, ``video``, ``pdf``, ``text`` or ``hex``. An SVG is text: its source is shown,
    never the document, which may hold script."""
    mime = artifact.mime_type
    if mime in DECODABLE:
        return "image"
    family = kind_of(mime)  # the media views' families: the PDF preview is theirs
    if family in {"pdf", "audio", "video"}:
        return family
    if mime.startswith("text/") or mime in _TEXT_TYPES or mime.endswith(("+json", "+xml")):
        return "text"
    return "hex"


def has_thumbnail(artifact: Artifact) -> bool:
    return preview_kind(artifact) == "image"


def size_words(size: int) -> str:
    return human_bytes(size)


def round_size_words(size: int) -> str:
    """A size such as a block size, without a needless decimal: ``1 MiB``, not ``1.0 MiB``."""
    return human_bytes(size).replace(".0 ", " ")


def verify_words(blocks: int, block_size: int, sha256_matches: bool) -> str:
    """What *Verify now* found: ``22 blocks of 1 MiB, each checked against its XXH3-128; SHA-256 matches``."""
    digest = "SHA-256 matches" if sha256_matches else "SHA-256 DOES NOT MATCH"
    if blocks == 0:
        return f"no blocks (no bytes); {digest}"
    if blocks == 1:
        return f"1 block of {round_size_words(block_size)}, checked against its XXH3-128; {digest}"
    return f"{blocks} blocks of {round_size_words(block_size)}, each checked against its XXH3-128; {digest}"


def _span(seconds: float) -> str:
    for unit, length in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= length:
            return f"{int(seconds // length)} {unit}"
    return f"{int(seconds)} s"


def age_words(moment: datetime, now: datetime) -> str:
    return f"{_span(max(0.0, (now - moment).total_seconds()))} ago"


def expiry_words(artifact: Artifact, now: datetime) -> str:
    if artifact.pinned or artifact.expires_at is None:
        return "never"
    return f"in {_span(max(0.0, (artifact.expires_at - now).total_seconds()))}"


def hex_lines(data: bytes) -> list[str]:
    """``offset  hex bytes  ascii`` lines of 16 bytes, as ``xxd`` prints them."""
    lines = []
    for start in range(0, len(data), 16):
        row = data[start : start + 16]
        hexed = " ".join(f"{byte:02x}" for byte in row)
        shown = "".join(chr(byte) if 0x20 <= byte < 0x7F else "." for byte in row)
        lines.append(f"{start:08x}  {hexed:<47}  {shown}")
    return lines


def text_head(data: bytes, mime: str) -> str:
    text = data.decode("utf-8", errors="replace")
    if mime == "application/json" or mime.endswith("+json"):
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            pass  # a head cut mid-document, or not JSON after all: shown as it is
    return text


def resource_link_json(artifact: Artifact) -> str:
    return json.dumps(resource_link(artifact), indent=2, ensure_ascii=False)


def curl_command(artifact: Artifact, base_url: str, *, with_token: bool) -> str:
    auth = ' -H "Authorization: Bearer $BLOBSTORE_TOKEN"' if with_token else ""
    url = f"{base_url}/v1/artifacts/{artifact.id}/content"
    return f"curl -fsS{auth} -o {shlex.quote(artifact.name.replace('/', '_'))} {url}"


def metadata_rows(values: dict[str, Any]) -> list[tuple[str, str]]:
    """Key and value of each member; values that are not strings as JSON. Escaped by the template."""
    return [
        (key, value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
        for key, value in sorted(values.items())
    ]

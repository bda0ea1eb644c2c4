"""What a result costs the host: its bytes and estimated tokens, counted as the host receives it.

Bytes are the compact JSON (UTF-8) of the result object plus :data:`ENVELOPE_BYTES`; tokens are
:func:`~mcp_resources.results.content.estimate_image_tokens` for each inline image (by its pixel size) and a
quarter of a token for every other byte.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Mapping
from typing import Any, Final

from blobstore.media import PROBE_BYTES, probe
from blobstore.tokens import estimate_image_tokens
from mcp_resources.proxy.long_values import LongString, StagedPayload, json_parts
from mcp_resources.proxy.rules import BYTES_PER_TOKEN
from mcp_resources.uris import ARTIFACT_META_KEY

ENVELOPE_BYTES: Final = 256
"""Room left for the JSON-RPC envelope (``jsonrpc``, ``id``) around the result object."""


def compact_size(value: Any) -> int:
    """Bytes of the compact JSON of ``value``; a long string counts what its JSON literal will be."""
    return sum(part.json_size if isinstance(part, LongString) else len(part) for part in json_parts(value))


def decode_base64(data: str) -> bytes | None:
    """The bytes of strict base64, or None when ``data`` is not base64."""
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


def image_size(block: Mapping[str, Any]) -> tuple[int, int] | None:
    """Pixel size of an inline image block, from our own _meta or from its header bytes."""
    meta = (block.get("_meta") or {}).get(ARTIFACT_META_KEY) or {}
    width, height = meta.get("width"), meta.get("height")
    if isinstance(width, int) and isinstance(height, int) and width > 0 and height > 0:
        return width, height
    data = block.get("data")
    if isinstance(data, StagedPayload):
        head: bytes | None = bytes(data.head)
    elif isinstance(data, str):
        head = decode_base64(data[: (PROBE_BYTES // 3) * 4])
    else:
        return None
    facts = probe(str(block.get("mimeType") or "image/png"), head or b"")
    width, height = facts.get("width"), facts.get("height")
    if isinstance(width, int) and isinstance(height, int) and width > 0 and height > 0:
        return width, height
    return None


def measure(result: Mapping[str, Any]) -> tuple[int, int]:
    """(bytes, estimated tokens) of a result as the host receives it.

    Bytes: the compact JSON of the result object plus :data:`ENVELOPE_BYTES`. Tokens: each inline ``image``
    block of ``content`` costs :func:`estimate_image_tokens` of its pixel size (its base64 is not counted
    again); every other byte costs 1/:data:`BYTES_PER_TOKEN` of a token, rounded up.
    """
    total = compact_size(result) + ENVELOPE_BYTES
    image_chars = 0
    image_tokens = 0
    content = result.get("content")
    for block in content if isinstance(content, list) else []:
        if (
            isinstance(block, dict)
            and block.get("type") == "image"
            and isinstance(block.get("data"), str | LongString)
        ):
            size = image_size(block)
            if size is not None:
                image_chars += len(block["data"])
                image_tokens += estimate_image_tokens(*size)
    return total, image_tokens + math.ceil((total - image_chars) / BYTES_PER_TOKEN)

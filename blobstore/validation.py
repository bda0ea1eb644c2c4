"""Validation of the names, MIME types and user metadata that clients attach to artifacts and uploads."""

from __future__ import annotations

import json
from typing import Any

from blobstore.errors import InvalidRequest
from blobstore.media import is_valid_mime

MAX_NAME_LENGTH = 1024
MAX_METADATA_BYTES = 16 * 1024


def validate_name(name: str) -> str:
    if not name or len(name) > MAX_NAME_LENGTH or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in name):
        raise InvalidRequest("name must be 1-1024 printable characters")
    return name


def validate_mime(mime_type: str | None) -> str | None:
    if mime_type is None:
        return None
    base = mime_type.split(";", 1)[0].strip()
    if not is_valid_mime(base):
        raise InvalidRequest("mime_type must be a type/subtype media type")
    return base.lower()


def validate_metadata(metadata: dict[str, Any] | None) -> dict[str, Any]:
    if metadata is None:
        return {}
    try:
        encoded = json.dumps(metadata, separators=(",", ":"))
    except (TypeError, ValueError):
        raise InvalidRequest("metadata must be a JSON object") from None
    if len(encoded.encode()) > MAX_METADATA_BYTES:
        raise InvalidRequest(f"metadata must be at most {MAX_METADATA_BYTES} bytes of JSON")
    return metadata

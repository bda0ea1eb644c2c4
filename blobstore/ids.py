"""Random, unguessable identifiers (at least 128 bits, URL-safe, never derived from content)."""

from __future__ import annotations

import re
import secrets

from blobstore.errors import NotFound

_ID = re.compile(r"^[a-z]{1,4}_[A-Za-z0-9_-]{22,43}$")


def new_artifact_id() -> str:
    return f"a_{secrets.token_urlsafe(18)}"


def new_upload_id() -> str:
    return f"u_{secrets.token_urlsafe(18)}"


def check_id(value: str) -> str:
    """Validate an outside id before any query or storage call; malformed ids are simply not found."""
    if not _ID.fullmatch(value):
        raise NotFound()
    return value

"""Generation keys and staging names shared by every backend.

A generation key is ``blobs/<hex[0:2]>/<hex[2:4]>/<sha256 hex>.<suffix>`` when the digest is known at publish
time, and ``blobs/_/<r[0:2]>/<r>`` when it is not (an S3 stream whose digest is only known once it has been
uploaded). The suffix and ``r`` are 128 random bits, URL-safe, so two writes of the same content never share a
key and a delayed delete of an old generation can never remove a newer one.

Keys and staging refs come back from the metadata and are joined onto file-system paths and object keys, so
every one is validated against a strict pattern: no traversal, no NUL, no absolute path can get through.
"""

from __future__ import annotations

import functools
import re
import secrets

from blobstore.digests import is_hex_digest
from blobstore.errors import InvalidRequest

BLOB_DIR = "blobs"
UNKNOWN_DIGEST_DIR = "_"

_SUFFIX = r"[A-Za-z0-9_-]{22}"
_KEY = re.compile(
    rf"{BLOB_DIR}/(?:[0-9a-f]{{2}}/[0-9a-f]{{2}}/[0-9a-f]{{64}}\.{_SUFFIX}"
    rf"|{UNKNOWN_DIGEST_DIR}/[A-Za-z0-9_-]{{2}}/{_SUFFIX})"
)
_STAGING_REF = re.compile(r"[A-Za-z0-9_-]{1,128}")


def random_suffix() -> str:
    """128 random bits, URL-safe base64 without padding (22 characters)."""
    return secrets.token_urlsafe(16)


def generation_key(sha256: str | None) -> str:
    """A fresh generation key: digest fan-out when ``sha256`` (lower-case hex) is known, random otherwise."""
    suffix = random_suffix()
    if sha256 is None:
        return f"{BLOB_DIR}/{UNKNOWN_DIGEST_DIR}/{suffix[:2]}/{suffix}"
    if not is_hex_digest(sha256):
        raise InvalidRequest("sha256 must be 64 lower-case hex digits")
    return f"{BLOB_DIR}/{sha256[:2]}/{sha256[2:4]}/{sha256}.{suffix}"


@functools.lru_cache(maxsize=1024)
def is_generation_key(key: str) -> bool:
    # Remembered: every read of a blob checks its key again, and the answer for a string never changes.
    if _KEY.fullmatch(key) is None:
        return False
    _, first, second, name = key.split("/")
    if first == UNKNOWN_DIGEST_DIR:
        return name[:2] == second
    return name[:2] == first and name[2:4] == second


def validate_key(key: str) -> str:
    if not isinstance(key, str) or not is_generation_key(key):
        raise InvalidRequest("malformed storage key")
    return key


def validate_staging_ref(staging_ref: str) -> str:
    if not isinstance(staging_ref, str) or _STAGING_REF.fullmatch(staging_ref) is None:
        raise InvalidRequest("malformed staging reference")
    return staging_ref


def validate_chunk_index(index: int) -> int:
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise InvalidRequest("chunk index must be a non-negative integer")
    return index

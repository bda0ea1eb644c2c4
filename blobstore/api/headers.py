"""Sans-I/O parsing and formatting of the headers the HTTP edge speaks beyond ranges.

- ``Content-Digest`` (RFC 9530) carrying a ``sha-256`` digest of a chunk or a raw upload body.
- ``X-Chunk-XXH3``: the XXH3-128 of a chunk as 32 hex digits, a cheaper alternative to SHA-256 that this
  service defines (documented in ``docs/http-api.md``).
- HTTP dates for ``Last-Modified`` / ``If-Modified-Since``.

``Content-Disposition`` is built in :mod:`blobstore.disposition`, shared with presigned S3 downloads.
"""

from __future__ import annotations

import base64
import binascii
import email.utils
import functools
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Final

from blobstore.digests import normalize_xxh3
from blobstore.errors import InvalidRequest

CONTENT_DIGEST: Final = "content-digest"
CHUNK_XXH3: Final = "x-chunk-xxh3"

_SF_KEY = re.compile(r"[a-z*][a-z0-9_\-.*]*")
_SF_BYTES = re.compile(r":([A-Za-z0-9+/=]*):")


def first_values(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """An ASGI request's headers as a dict, the first value of a repeated name kept (as Starlette's
    ``Headers.get`` answers): one pass for the several lookups of a hot path, where ``Headers`` scans and
    decodes the whole list on each. Names stay as the server gave them (ASGI servers lower-case them)."""
    found: dict[str, str] = {}
    for name, value in raw:
        found.setdefault(name.decode("latin-1"), value.decode("latin-1"))
    return found


def parse_content_digest(value: str) -> str | None:
    """The SHA-256 in a ``Content-Digest`` value as 64 hex digits; None when no ``sha-256`` member is present.

    RFC 9530 §2: Content-Digest "is a Dictionary (see Section 3.2 of [STRUCTURED-FIELDS]) where each: key
    conveys the hashing algorithm (see Section 5) used to compute the digest; value is a Byte Sequence
    (Section 3.3.5 of [STRUCTURED-FIELDS]) that conveys an encoded version of the byte output produced by the
    digest calculation." Algorithms other than ``sha-256`` are skipped: we cannot check them, and the body is
    hashed with SHA-256 anyway. A malformed dictionary is refused rather than silently unchecked.
    """
    found: str | None = None
    for member in value.split(","):
        item = member.strip()
        if not item:
            continue
        key, eq, rest = item.partition("=")
        key = key.strip()
        if not eq or not _SF_KEY.fullmatch(key):
            raise InvalidRequest("malformed Content-Digest: expected algorithm=:base64:")
        raw_value = rest.split(";", 1)[0].strip()  # parameters carry nothing we use
        match = _SF_BYTES.fullmatch(raw_value)
        if match is None:
            raise InvalidRequest("malformed Content-Digest: the digest must be a :base64: byte sequence")
        if key != "sha-256":
            continue
        try:
            digest = base64.b64decode(match.group(1), validate=True)
        except binascii.Error:
            raise InvalidRequest("malformed Content-Digest: invalid base64") from None
        if len(digest) != 32:
            raise InvalidRequest("malformed Content-Digest: sha-256 must be 32 bytes")
        found = digest.hex()
    return found


def format_content_digest(sha256_hex: str) -> str:
    return f"sha-256=:{base64.b64encode(bytes.fromhex(sha256_hex)).decode()}:"


def parse_xxh3_header(value: str) -> str:
    """``X-Chunk-XXH3: <32 hex digits>`` (XXH3-128, big-endian canonical form as ``xxhash`` prints it)."""
    try:
        return normalize_xxh3(value)
    except InvalidRequest:
        raise InvalidRequest("X-Chunk-XXH3 must be 32 hex digits (XXH3-128)") from None


# Every download of an artifact formats its Last-Modified again; email.utils is a few % of a small range read.
@functools.lru_cache(maxsize=1024)
def http_date(moment: datetime) -> str:
    """IMF-fixdate (RFC 9110 §5.6.7), e.g. ``Sun, 06 Nov 1994 08:49:37 GMT``."""
    return email.utils.format_datetime(moment.astimezone(UTC).replace(microsecond=0), usegmt=True)


def parse_http_date(value: str) -> datetime | None:
    """A parsed HTTP date, or None: RFC 9110 §13.1.3 says an invalid date in If-Modified-Since is ignored."""
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed

"""Sans-I/O parsing and formatting of the tus 1.0.0 headers.

Quotations are from the tus 1.0.0 protocol (https://tus.io/protocols/resumable-upload, ``protocol.md``). Every
parser raises :class:`~blobstore.errors.InvalidRequest` for a malformed value and never echoes the value
itself: a metadata value may be a secret or content.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Final

from blobstore.digests import normalize_sha256
from blobstore.errors import InvalidRequest

TUS_VERSION: Final = "1.0.0"
OFFSET_OCTET_STREAM: Final = "application/offset+octet-stream"

TUS_RESUMABLE: Final = "Tus-Resumable"
TUS_VERSION_HEADER: Final = "Tus-Version"
TUS_EXTENSION: Final = "Tus-Extension"
TUS_MAX_SIZE: Final = "Tus-Max-Size"
TUS_CHECKSUM_ALGORITHM: Final = "Tus-Checksum-Algorithm"
UPLOAD_OFFSET: Final = "Upload-Offset"
UPLOAD_LENGTH: Final = "Upload-Length"
UPLOAD_DEFER_LENGTH: Final = "Upload-Defer-Length"
UPLOAD_METADATA: Final = "Upload-Metadata"
UPLOAD_CHECKSUM: Final = "Upload-Checksum"
UPLOAD_EXPIRES: Final = "Upload-Expires"
METHOD_OVERRIDE: Final = "X-HTTP-Method-Override"

EXTENSIONS: Final = ("creation", "creation-with-upload", "expiration", "checksum", "termination")
CHECKSUM_ALGORITHMS: Final = ("sha1", "sha256", "sha512")
"""Checksum extension: "The Server MUST support at least the SHA1 checksum algorithm identified by sha1"."""

_DIGEST_SIZES: Final = {"sha1": 20, "sha256": 32, "sha512": 64}
_INTEGER = re.compile(r"[0-9]{1,19}")
_METADATA_KEY = re.compile(r"[^\s,]+")


def is_supported_version(value: str | None) -> bool:
    """Core protocol, Tus-Resumable: "If the version specified by the Client is not supported by the Server,
    it MUST respond with the 412 Precondition Failed status and MUST include the Tus-Version header"; a
    request without the header is not a tus 1.0.0 request either.
    """
    return value is not None and value.strip() == TUS_VERSION


def parse_non_negative(value: str, header: str) -> int:
    """Core protocol: "The Upload-Offset request and response header indicates a byte offset within a
    resource. The value MUST be a non-negative integer." (Upload-Length: likewise.)
    """
    text = value.strip()
    if not _INTEGER.fullmatch(text):
        raise InvalidRequest(f"{header} must be a non-negative integer", header=header)
    return int(text)


def parse_defer_length(value: str) -> bool:
    """Creation: "The value of the Upload-Defer-Length header MUST be 1. If the Server receives a request with
    a Upload-Defer-Length header of any other value, the Server SHOULD respond with 400 Bad Request".
    """
    if value.strip() != "1":
        raise InvalidRequest("Upload-Defer-Length must be 1", header=UPLOAD_DEFER_LENGTH)
    return True


def parse_metadata(value: str) -> dict[str, bytes]:
    """Creation: "The Upload-Metadata request and response header MUST consist of one or more
    comma-separated key-value pairs. The key and value MUST be separated by a space. The key MUST NOT contain
    spaces and commas and MUST NOT be empty. The key SHOULD be ASCII encoded and the value MUST be Base64
    encoded. All keys MUST be unique. The value MAY be empty. In these cases, the space, which would normally
    separate the key and the value, MAY be left out."
    """
    pairs: dict[str, bytes] = {}
    if not value.strip():
        return pairs
    for item in value.split(","):
        parts = item.strip().split(" ")
        if len(parts) > 2 or not _METADATA_KEY.fullmatch(parts[0]):
            raise InvalidRequest("Upload-Metadata must be comma-separated 'key base64value' pairs")
        key = parts[0]
        if key in pairs:
            raise InvalidRequest("Upload-Metadata keys must be unique", key=key)
        encoded = parts[1] if len(parts) == 2 else ""
        try:
            pairs[key] = base64.b64decode(encoded, validate=True)
        except binascii.Error:
            raise InvalidRequest("Upload-Metadata values must be base64", key=key) from None
    return pairs


def format_metadata(pairs: dict[str, bytes]) -> str:
    """The inverse of :func:`parse_metadata`, for HEAD, which "MUST include the Upload-Metadata header if
    the upload was created with one" (creation extension, "Upload-Metadata").
    """
    return ",".join(
        f"{key} {base64.b64encode(raw).decode('ascii')}" if raw else key for key, raw in pairs.items()
    )


def metadata_text(pairs: dict[str, bytes], key: str) -> str | None:
    raw = pairs.get(key)
    if raw is None:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidRequest("Upload-Metadata value must be UTF-8 text", key=key) from None


def metadata_sha256(raw: bytes) -> str:
    """A whole-object SHA-256 given as metadata: the raw 32-byte digest, or its text (hex, ``sha256:hex``)."""
    if len(raw) == 32:
        return raw.hex()
    try:
        return normalize_sha256(raw.decode("ascii"))
    except UnicodeDecodeError:
        raise InvalidRequest("sha256 metadata must be a SHA-256 digest", key="sha256") from None


@dataclass(frozen=True, slots=True)
class UploadChecksum:
    algorithm: str
    digest: bytes


def parse_checksum(value: str) -> UploadChecksum:
    """Checksum: "The Upload-Checksum request header contains information about the checksum of the current
    body payload. The header MUST consist of the name of the used checksum algorithm and the Base64 encoded
    checksum separated by a space." and "The Server MUST respond with the 400 Bad Request status if the
    checksum algorithm is not supported by the server".
    """
    parts = value.strip().split(" ")
    if len(parts) != 2 or not parts[0] or not parts[1]:
        raise InvalidRequest("Upload-Checksum must be '<algorithm> <base64 digest>'")
    algorithm, encoded = parts
    if algorithm not in CHECKSUM_ALGORITHMS:
        raise InvalidRequest("unsupported Upload-Checksum algorithm", supported=list(CHECKSUM_ALGORITHMS))
    try:
        digest = base64.b64decode(encoded, validate=True)
    except binascii.Error:
        raise InvalidRequest("Upload-Checksum digest must be base64") from None
    if len(digest) != _DIGEST_SIZES[algorithm]:
        raise InvalidRequest(f"an Upload-Checksum {algorithm} digest is {_DIGEST_SIZES[algorithm]} bytes")
    return UploadChecksum(algorithm, digest)


def is_offset_stream(content_type: str | None) -> bool:
    """Core protocol, PATCH: "All PATCH requests MUST use Content-Type: application/offset+octet-stream,
    otherwise the server SHOULD return a 415 Unsupported Media Type status."
    """
    if content_type is None:
        return False
    return content_type.split(";", 1)[0].strip().lower() == OFFSET_OCTET_STREAM

"""Protocol-neutral errors with stable codes.

Every failure the service reports is a :class:`BlobstoreError` subclass carrying a stable ``code``. The HTTP
edge (``blobstore.api.errors``) and the MCP edge (``mcp_resources.errors``) each map codes to their protocol
once; no HTTP status or JSON-RPC number appears here. Anything that is not a ``BlobstoreError`` is reported as
``internal`` without its text, so unknown errors never leak details.

Hierarchy::

    BlobstoreError
    ├── InvalidRequest            invalid_request       (malformed input, bad parameters)
    │   ├── InvalidRange          invalid_range
    │   ├── RangeNotSatisfiable   range_not_satisfiable
    │   ├── RangeRequired         range_required
    │   ├── ChunkSizeInvalid      chunk_size_invalid
    │   ├── ChunkIndexOutOfRange  chunk_index_out_of_range
    │   ├── ChecksumMismatch      checksum_mismatch     (a chunk's Content-Digest / xxh3 did not match)
    │   ├── DigestMismatch        digest_mismatch       (whole object SHA-256 did not match the claim)
    │   ├── SizeMismatch          size_mismatch
    │   └── UploadIncomplete      upload_incomplete
    ├── NotFound                  not_found
    ├── Conflict                  conflict
    │   ├── CompletionLost        conflict              (another request took over an upload's completion)
    │   ├── ChunkConflict         chunk_conflict        (same index, different bytes)
    │   └── UploadNotOpen         upload_not_open       (aborted, expired or completed)
    ├── LimitExceeded             limit_exceeded
    │   ├── TooLarge              too_large
    │   ├── QuotaExceeded         quota_exceeded
    │   ├── TooManyUploads        too_many_uploads
    │   └── TooManyRanges         too_many_ranges
    ├── Unauthorized              unauthorized
    ├── Forbidden                 forbidden             (missing scope; never used for foreign namespaces)
    │   ├── CsrfRejected          forbidden             (a console change without its CSRF token)
    │   ├── LinkRefused           forbidden             (a signed link expired, tampered with or revoked)
    │   └── CrossOriginRefused    cross_origin_refused  (a change sent by a page of another origin)
    ├── HostNotAllowed            host_not_allowed      (a Host header that names none of the server's names)
    ├── RequestTimeout            request_timeout       (a request body stalled)
    ├── StorageFull               storage_full          (ENOSPC, EDQUOT)
    ├── StorageUnavailable        storage_unavailable   (I/O error, backend down)
    │   └── DatabaseNotMigrated   storage_unavailable   (the metadata schema is not at the newest migration)
    ├── Corruption                corruption            (stored bytes fail their checksum)
    ├── Internal                  internal
    ├── UpstreamUnavailable       upstream_unavailable  (the proxy's upstream MCP server is gone)
    ├── UnsupportedMedia          unsupported_media     (a view of a type that has no such view)
    ├── MediaInvalid              media_invalid         (the decoder refused the bytes: truncated, encrypted)
    ├── ViewTooLarge              view_too_large        (a view over its pixel, memory or size budget)
    ├── ViewTimeout               view_timeout          (the decoder ran past BLOBSTORE_VIEW_TIMEOUT_SECONDS)
    └── ServerUnreachable         server_unreachable    (client side: no answer from the server at all)
"""

from __future__ import annotations

import errno
from typing import Any, ClassVar


class BlobstoreError(Exception):
    """Base of every error the service reports; ``code`` is stable, ``message`` is safe to show."""

    code: ClassVar[str] = "internal"
    default_message: ClassVar[str] = "internal error"

    def __init__(self, message: str | None = None, **details: Any) -> None:
        self.message = message or self.default_message
        self.details: dict[str, Any] = details
        super().__init__(self.message)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code!r})"


class InvalidRequest(BlobstoreError):
    code = "invalid_request"
    default_message = "invalid request"


class InvalidRange(InvalidRequest):
    code = "invalid_range"
    default_message = "malformed range"


class RangeNotSatisfiable(InvalidRequest):
    code = "range_not_satisfiable"
    default_message = "range not satisfiable"


class RangeRequired(InvalidRequest):
    code = "range_required"
    default_message = "artifact is larger than the inline limit; read it in windows"


class ChunkSizeInvalid(InvalidRequest):
    code = "chunk_size_invalid"
    default_message = "chunk has the wrong length"


class ChunkIndexOutOfRange(InvalidRequest):
    code = "chunk_index_out_of_range"
    default_message = "chunk index is past the declared size"


class ChecksumMismatch(InvalidRequest):
    code = "checksum_mismatch"
    default_message = "chunk checksum does not match its bytes"


class DigestMismatch(InvalidRequest):
    code = "digest_mismatch"
    default_message = "sha256 of the received bytes does not match the declared digest"


class SizeMismatch(InvalidRequest):
    code = "size_mismatch"
    default_message = "size of the received bytes does not match the declared size"


class UploadIncomplete(InvalidRequest):
    code = "upload_incomplete"
    default_message = "upload is missing chunks"


class NotFound(BlobstoreError):
    code = "not_found"
    default_message = "not found"


class Conflict(BlobstoreError):
    code = "conflict"
    default_message = "conflict"


class CompletionLost(Conflict):
    """The completion lease passed to another completer: this commit would duplicate its result."""

    default_message = "another request took over this completion"


class ChunkConflict(Conflict):
    code = "chunk_conflict"
    default_message = "a chunk with this index was already received with different bytes"


class UploadNotOpen(Conflict):
    code = "upload_not_open"
    default_message = "upload is no longer open"


class LimitExceeded(BlobstoreError):
    code = "limit_exceeded"
    default_message = "limit exceeded"


class TooLarge(LimitExceeded):
    code = "too_large"
    default_message = "artifact exceeds the maximum size"


class QuotaExceeded(LimitExceeded):
    code = "quota_exceeded"
    default_message = "namespace quota exceeded"


class TooManyUploads(LimitExceeded):
    code = "too_many_uploads"
    default_message = "too many open uploads in this namespace"


class TooManyRanges(LimitExceeded):
    code = "too_many_ranges"
    default_message = "too many ranges in one request"


class Unauthorized(BlobstoreError):
    code = "unauthorized"
    default_message = "missing or invalid bearer token"


class Forbidden(BlobstoreError):
    code = "forbidden"
    default_message = "token lacks the required scope"


class CsrfRejected(Forbidden):
    default_message = "the request lacks the console's CSRF token"


class LinkRefused(Forbidden):
    default_message = "the link has expired or is not valid"


class CrossOriginRefused(Forbidden):
    """A state-changing request that a browser says a page of another origin sent (``Origin``, else
    ``Sec-Fetch-Site``), from none of the server's own origins or ``BLOBSTORE_CORS_ORIGINS``."""

    code = "cross_origin_refused"
    default_message = "a page of another origin may not change anything here"


class HostNotAllowed(BlobstoreError):
    """The ``Host`` header names none of the names this server answers to (DNS-rebinding protection)."""

    code = "host_not_allowed"
    default_message = "this server does not answer to that host name"


class RequestTimeout(BlobstoreError):
    code = "request_timeout"
    default_message = "the request body stalled; nothing arrived for too long"


class StorageFull(BlobstoreError):
    code = "storage_full"
    default_message = "storage is full"


class StorageUnavailable(BlobstoreError):
    code = "storage_unavailable"
    default_message = "storage is unavailable"

    def __init__(
        self,
        message: str | None = None,
        *,
        operation: str | None = None,
        backend_code: str | None = None,
        **details: Any,
    ) -> None:
        super().__init__(message, **details)
        # For the logs only (never sent to clients): which backend call failed and the backend's error code.
        self.operation = operation
        self.backend_code = backend_code

    def __repr__(self) -> str:
        where = "".join(
            f", {name}={value!r}"
            for name, value in (("operation", self.operation), ("backend_code", self.backend_code))
            if value
        )
        return f"{type(self).__name__}({self.message!r}, code={self.code!r}{where})"


class DatabaseNotMigrated(StorageUnavailable):
    """The metadata database was never migrated or is behind this version's newest migration, and what
    opened it does not migrate (admin commands on PostgreSQL: see :func:`blobstore.runtime.open_runtime`)."""

    default_message = "the metadata database is not migrated: run `blobstore migrate`"


class Corruption(BlobstoreError):
    code = "corruption"
    default_message = "stored bytes failed their integrity check"


class Internal(BlobstoreError):
    code = "internal"
    default_message = "internal error"


class UpstreamUnavailable(BlobstoreError):
    """``blobstore proxy``: the upstream MCP server exited or cannot be reached."""

    code = "upstream_unavailable"
    default_message = "the upstream MCP server is unavailable"


class UnsupportedMedia(BlobstoreError):
    """A media view asked of an artifact whose type has no such view (pages of a WAV, audio of a PNG)."""

    code = "unsupported_media"
    default_message = "this view does not apply to the artifact's media type"


class MediaInvalid(BlobstoreError):
    """The decoder refused the artifact's bytes: truncated, encrypted, malformed or not what its type says."""

    code = "media_invalid"
    default_message = "the artifact's bytes could not be decoded as its media type"


class ViewTooLarge(BlobstoreError):
    """A view would exceed its budget: pixels, the decoder's memory, or the answer's size."""

    code = "view_too_large"
    default_message = "the view exceeds its size, pixel or memory budget"


class ViewTimeout(BlobstoreError):
    """The decoder did not finish within ``BLOBSTORE_VIEW_TIMEOUT_SECONDS``; its worker was killed."""

    code = "view_timeout"
    default_message = "decoding the view took too long"


class MessageRefused(BlobstoreError):
    """``blobstore proxy``: a message it does not relay (``cause``): what it would hold of it is over
    ``BLOBSTORE_PROXY_MAX_MESSAGE_BYTES`` (``over_cap``), it is not JSON (``invalid_json``), or its stream
    ended inside it (``cut_off``)."""

    code = "message_refused"
    default_message = "the message was refused"


class ServerUnreachable(BlobstoreError):
    """Raised by the client only: the server could not be connected to (or kept dropping the connection)."""

    code = "server_unreachable"
    default_message = "the blobstore server is unreachable"


_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def from_os_error(exc: OSError) -> BlobstoreError:
    """Translate an ``OSError`` raised by storage I/O into the catalogue, without the path or text."""
    if exc.errno in _FULL_ERRNOS:
        return StorageFull()
    return StorageUnavailable()


def all_codes() -> dict[str, type[BlobstoreError]]:
    """Every code in the catalogue, for the edges' mapping tables and their completeness tests."""
    found: dict[str, type[BlobstoreError]] = {}
    pending: list[type[BlobstoreError]] = [BlobstoreError]
    while pending:
        cls = pending.pop()
        found.setdefault(cls.code, cls)
        pending.extend(cls.__subclasses__())
    return found


class ContentNotLive(Exception):
    """A commit that may only deduplicate found no live blob of its content (it was collected meanwhile).

    Internal, never reported: the service keeps the bytes after all and commits again.
    """

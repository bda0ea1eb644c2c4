"""Direct uploads: chunked uploads whose parts the client writes straight to S3 through presigned URLs.

Offered when ``BLOBSTORE_S3_PRESIGN_UPLOADS`` is on, the store supports it (S3) and the client asks for it
with a declared size and SHA-256. Such an upload is recorded with the protocol :data:`DIRECT_PROTOCOL`; it
goes through the same states as any chunked upload (``open → completing → completed | aborted | expired``),
but its bytes never pass through a server: the completion has the store complete the multipart upload and read
the object back to verify it (``SupportsDirectUpload.direct_commit``) before the artifact is committed
exactly like any other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from blobstore.config import Settings
from blobstore.errors import Conflict, InvalidRequest, UploadNotOpen
from blobstore.models import BlobInfo, UploadSession, UploadState
from blobstore.storage.base import (
    DIRECT_MAX_PARTS,
    DIRECT_MIN_PART_SIZE,
    BlobStore,
    DirectPart,
    ProgressCallback,
    SupportsDirectUpload,
)

DIRECT_PROTOCOL = "s3-direct"
"""The ``protocol`` recorded for a direct upload."""
PARTS_PER_REQUEST = 1000
"""Most presigned part URLs one answer carries."""


@dataclass(frozen=True, slots=True)
class DirectOffer:
    """Presigned part URLs for a direct upload, all valid until ``expires_at``."""

    part_size: int
    part_count: int
    expires_at: datetime
    parts: list[DirectPart]


def is_direct(session: UploadSession) -> bool:
    return session.protocol == DIRECT_PROTOCOL


def direct_store(settings: Settings, blobs: BlobStore) -> SupportsDirectUpload | None:
    """The store as a direct-upload target, or None when direct uploads are off or not possible."""
    if settings.s3_presign_uploads and isinstance(blobs, SupportsDirectUpload):
        return blobs
    return None


def direct_part_size(chunk_size: int, size: int) -> int | None:
    """The part size of a direct upload of ``size`` bytes, or None when S3's part limit rules it out."""
    # The chunk size is raised to S3's minimum part size.
    part_size = max(chunk_size, DIRECT_MIN_PART_SIZE)
    return part_size if -(-size // part_size) <= DIRECT_MAX_PARTS else None


def part_count(session: UploadSession) -> int:
    size = session.declared_size or 0
    return -(-size // session.chunk_size)


def _target(blobs: BlobStore, session: UploadSession) -> SupportsDirectUpload:
    # Not the setting: an upload begun direct stays direct if the operator turns the setting off meanwhile.
    if not is_direct(session) or not isinstance(blobs, SupportsDirectUpload):
        raise Conflict("this upload does not take its parts through presigned URLs")
    return blobs


async def offer(
    settings: Settings,
    blobs: BlobStore,
    session: UploadSession,
    now: datetime,
    numbers: Sequence[int] | None = None,
) -> DirectOffer:
    """Presigned URLs for the parts ``numbers`` (default: the first :data:`PARTS_PER_REQUEST`)."""
    store = _target(blobs, session)
    if session.state is not UploadState.OPEN:
        raise UploadNotOpen(f"upload is {session.state.value}", state=session.state.value)
    count = part_count(session)
    chosen = list(numbers) if numbers is not None else list(range(1, min(count, PARTS_PER_REQUEST) + 1))
    if len(chosen) > PARTS_PER_REQUEST:
        raise InvalidRequest(f"at most {PARTS_PER_REQUEST} part URLs per request")
    lifetime = settings.s3_presign_seconds
    parts = await store.direct_parts(
        session.staging_ref,
        chosen,
        part_size=session.chunk_size,
        size=session.declared_size or 0,
        expires_in=lifetime,
    )
    return DirectOffer(session.chunk_size, count, now + timedelta(seconds=lifetime), parts)


async def commit(
    blobs: BlobStore,
    session: UploadSession,
    sha256: str | None,
    progress: ProgressCallback | None,
    part_etags: Mapping[int, str] | None = None,
) -> BlobInfo:
    store = _target(blobs, session)
    if session.declared_size is None or sha256 is None:
        raise InvalidRequest("a direct upload needs its declared size and sha256")
    return await store.direct_commit(
        session.staging_ref,
        part_size=session.chunk_size,
        expected_size=session.declared_size,
        expected_sha256=sha256,
        progress=progress,
        part_etags=part_etags,
    )


async def restart(blobs: BlobStore, session: UploadSession) -> None:
    """After a completion failed past the store's checks: a fresh multipart upload, the upload still open."""
    if isinstance(blobs, SupportsDirectUpload) and session.declared_sha256 is not None:
        await blobs.direct_restart(session.staging_ref, sha256=session.declared_sha256)

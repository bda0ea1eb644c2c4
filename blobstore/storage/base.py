"""The blob storage contract.

A :class:`BlobStore` keeps immutable objects under *generation keys*: a fan-out prefix plus a random
suffix, so a delayed delete of one generation can never remove a newer copy of the same content. Every
write is hashed while it streams (SHA-256 of the object, XXH3-128 of each fixed block), checked
against the caller's claims and published atomically; nothing is visible under a generation key until it
is complete and verified.

Chunked uploads go through *staging*: ``stage_begin`` returns an opaque ``staging_ref`` that the metadata
keeps (so chunks of one upload may arrive at different replicas), ``stage_put`` keeps one chunk,
``stage_commit`` turns the staged chunks into a blob, ``stage_abort`` frees them.

Optional capabilities are separate protocols, checked with ``isinstance``: :class:`SupportsLocalPath`
(zero-copy downloads from local disk), :class:`SupportsBlockingRead` (a verified range read inside a worker
thread's call), :class:`SupportsCachedRead` (the same read on the event loop when it needs no disk) and
:class:`SupportsPresign` (redirects to presigned S3 URLs).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Final, Protocol, runtime_checkable

from blobstore.digests import DEFAULT_BLOCK_SIZE as DEFAULT_BLOCK_SIZE
from blobstore.digests import StreamDigest
from blobstore.models import BlobInfo, ChunkReceipt, StagingEntry, StoredObject

DIRECT_MIN_PART_SIZE = 5 * 1024 * 1024
DIRECT_MAX_PARTS = 10_000
"""S3's limits on the parts of a multipart upload, which a direct upload is: at least 5 MiB each but the last,
at most 10,000."""

ProgressCallback = Callable[[int], Awaitable[None]]
"""Called with the number of bytes processed so far during long operations (commit hashing)."""


NOT_KEPT: Final = ""
"""The key of a :class:`BlobInfo` that ``put`` returned without keeping the bytes: ``present`` said the store
already holds them. Such a blob can be referenced only by deduplicating onto the live copy."""

Present = Callable[[StreamDigest], bool]
"""Asked by ``put`` on a worker thread, once a short body is hashed and its claims checked: True when the
store already holds these bytes durably (a live blob of this digest and size), so they need not be written
again."""


class BlobStore(Protocol):
    """Core storage contract shared by the memory, local-disk and S3 backends."""

    kind: str
    """``memory``, ``local`` or ``s3``."""

    block_size: int
    """Bytes per integrity block of the blobs it writes."""

    async def put(
        self,
        data: AsyncIterable[bytes],
        *,
        expected_size: int | None = None,
        expected_sha256: str | None = None,
        max_size: int | None = None,
        present: Present | None = None,
    ) -> BlobInfo:
        """Stream ``data`` into a new generation and publish it atomically.

        Raises ``SizeMismatch`` / ``DigestMismatch`` when a claim fails and ``TooLarge`` past ``max_size``; in
        every failure nothing stays visible. ``StorageFull`` / ``StorageUnavailable`` for I/O errors.

        With ``present``, a backend that takes a short body in one step (local disk) asks it once the body is
        hashed and checked; when it answers True the bytes are neither written nor published and the result's
        key is ``NOT_KEPT`` (``blobstore.storage.writes``). Other backends ignore it.
        """
        ...

    def read(self, blob: BlobInfo, offset: int = 0, length: int | None = None) -> AsyncIterator[bytes]:
        """Yield bytes ``[offset, offset+length)`` (to the end when ``length`` is None).

        Every block the range touches is checked against ``blob.block_xxh3`` before any of its bytes
        are yielded; a mismatch raises ``Corruption``. A missing object raises ``NotFound``. The caller
        validates the range against ``blob.size``.
        """
        ...

    async def delete(self, key: str) -> None:
        """Remove one generation; deleting a missing key is not an error."""
        ...

    async def exists(self, key: str) -> bool: ...

    def iter_objects(self) -> AsyncIterator[StoredObject]:
        """Every published generation key in the store (not staging)."""
        ...

    async def check(self) -> None:
        """Raise ``StorageUnavailable`` when the backend cannot be reached (readiness probe)."""
        ...

    async def close(self) -> None: ...

    # -- staging for chunked uploads ------------------------------------------------------------------------

    async def stage_begin(self, upload_id: str, *, chunk_size: int) -> str:
        """Prepare staging for one upload; return the opaque ``staging_ref`` to persist in the metadata."""
        ...

    async def stage_put(
        self,
        staging_ref: str,
        index: int,
        data: AsyncIterable[bytes],
        *,
        expected_length: int | None = None,
        max_length: int | None = None,
        expected_sha256: str | None = None,
        expected_xxh3: str | None = None,
    ) -> ChunkReceipt:
        """Keep chunk ``index``, hashed while written.

        Wrong length: ``ChunkSizeInvalid``; checksum claim fails: ``ChecksumMismatch``; the index is already
        staged with different bytes: ``ChunkConflict``; with the same bytes: the same receipt again. In every
        failure the chunk is not kept and an earlier copy of it is untouched.
        """
        ...

    async def stage_commit(
        self,
        staging_ref: str,
        chunks: Sequence[ChunkReceipt],
        *,
        expected_size: int | None = None,
        expected_sha256: str | None = None,
        progress: ProgressCallback | None = None,
    ) -> BlobInfo:
        """Join the staged ``chunks`` (contiguous, in index order) into one published, verified generation.

        On a digest or size mismatch nothing is published and the staged chunks stay, so the client may fix
        the upload or abort it.
        """
        ...

    async def stage_abort(self, staging_ref: str) -> None:
        """Free everything staged under ``staging_ref``; idempotent."""
        ...

    def iter_staging(self) -> AsyncIterator[StagingEntry]:
        """Staging areas present in the backend, with their last modification time (for leftover sweeps)."""
        ...

    async def sweep_temp(self, older_than: datetime, *, abandoned_before: datetime | None = None) -> int:
        """Remove half-written temporary files of interrupted ``put`` calls older than ``older_than``.

        A backend that can tell whether a live process still writes a file (the local disk: its writer holds
        a lock) removes unowned files untouched since ``abandoned_before`` instead, and never an owned one.
        Returns how many were removed. Backends with nothing of the kind return 0.
        """
        ...


@runtime_checkable
class SupportsLocalPath(Protocol):
    """A backend whose published blobs are plain files that a server may send zero-copy."""

    def local_path(self, blob: BlobInfo) -> Path: ...


@runtime_checkable
class SupportsBlockingRead(Protocol):
    """A backend whose reads are plain blocking calls (local disk, memory).

    A caller already on a worker thread (the service's one-call range read, which looks the artifact up there)
    reads the bytes in the same call instead of handing over to another thread.
    """

    def read_blocking(self, blob: BlobInfo, offset: int, length: int) -> bytes:
        """Bytes ``[offset, offset+length)`` in one piece, every block they touch checked first, as
        :meth:`BlobStore.read` does (``Corruption``, ``NotFound``). Blocks: call it off the event loop."""
        ...


@runtime_checkable
class SupportsCachedRead(Protocol):
    """A backend that can answer a read from memory alone, without waiting (local disk's page cache, memory).

    The service's range read tries it on the event loop first (``blobstore.nowait``) and, when it raises
    :class:`~blobstore.nowait.WouldBlock`, reads again with :meth:`SupportsBlockingRead.read_blocking` on a
    worker thread.
    """

    def read_cached(self, blob: BlobInfo, offset: int, length: int) -> bytes:
        """What :meth:`SupportsBlockingRead.read_blocking` returns, with the same checks, when every byte it
        needs is in memory; ``WouldBlock`` (nothing returned) when any is not, or when the object is
        shorter than its record (the blocking read then tells ``Corruption``). Never waits for the disk."""
        ...


@runtime_checkable
class SupportsPresign(Protocol):
    """A backend that can hand out a time-limited URL for a direct ranged download."""

    async def presigned_url(
        self,
        blob: BlobInfo,
        *,
        expires_in: int,
        filename: str | None = None,
        content_type: str | None = None,
    ) -> str:
        """A GET URL of ``blob``'s generation, valid for ``expires_in`` seconds, whose answer names
        ``filename`` as an attachment and has ``content_type``."""
        ...


@dataclass(frozen=True, slots=True)
class DirectPart:
    """One part of a direct upload: its 1-based number, its exact length and where to ``PUT`` it."""

    number: int
    size: int
    url: str


@runtime_checkable
class SupportsDirectUpload(Protocol):
    """A backend whose clients may write an upload's parts themselves, through presigned URLs.

    The staging area of such an upload holds the backend's multipart upload at a generation key of the
    declared digest; ``stage_abort`` frees it like any staging. Nothing is published until ``direct_commit``
    has read the whole object back and verified its size and SHA-256.
    """

    async def direct_begin(self, upload_id: str, *, sha256: str) -> str:
        """Start the multipart upload for a declared ``sha256``; return the ``staging_ref`` to persist."""
        ...

    async def direct_parts(
        self, staging_ref: str, numbers: Sequence[int], *, part_size: int, size: int, expires_in: int
    ) -> list[DirectPart]:
        """Presigned ``PUT`` URLs for the parts ``numbers`` of an upload of ``size`` bytes."""
        ...

    async def direct_commit(
        self,
        staging_ref: str,
        *,
        part_size: int,
        expected_size: int,
        expected_sha256: str,
        progress: ProgressCallback | None = None,
        part_etags: Mapping[int, str] | None = None,
    ) -> BlobInfo:
        """Check the parts, complete the multipart upload and verify the object by reading it back.

        The parts are listed from the backend; ``part_etags`` (the client's, by part number) stand in where
        the backend cannot list them.

        A missing part is ``UploadIncomplete`` (part numbers), a part of the wrong length
        ``ChunkSizeInvalid``; both leave the parts in place. A size or digest mismatch deletes the object and
        starts a fresh multipart upload, so the upload may be sent again or aborted; nothing is visible either
        way.
        """
        ...

    async def direct_restart(self, staging_ref: str, *, sha256: str) -> None:
        """A fresh, empty multipart upload for ``staging_ref``, after a commit that completed the previous one
        failed later (its object deleted)."""
        ...

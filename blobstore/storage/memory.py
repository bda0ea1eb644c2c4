"""In-memory backend: the same semantics as the disk and S3 backends, for tests and demos.

Writes are hashed and verified before they become visible, staging keeps receipts and refuses conflicting
resends, and reads check every block, so code tested against it behaves the same on real storage.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from blobstore.digests import ChunkHasher, HashingWriter, StreamDigest
from blobstore.errors import ChunkConflict, InvalidRequest, NotFound, UploadIncomplete
from blobstore.models import BlobInfo, ChunkReceipt, StagingEntry, StoredObject
from blobstore.storage.base import DEFAULT_BLOCK_SIZE
from blobstore.storage.integrity import read_verified, read_verified_blocking
from blobstore.storage.keys import generation_key, validate_key, validate_staging_ref
from blobstore.storage.staging import check_staged
from blobstore.storage.writes import BlobSink, ChunkSink, CommitSink, StagedWrites


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(slots=True)
class _Object:
    data: bytearray
    modified: datetime


@dataclass(slots=True)
class _Staging:
    chunk_size: int
    modified: datetime
    chunks: dict[int, tuple[bytes, ChunkReceipt]] = field(default_factory=dict)


class MemoryBlobStore(StagedWrites):
    kind = "memory"

    def __init__(self, *, block_size: int = DEFAULT_BLOCK_SIZE) -> None:
        if block_size <= 0:
            raise InvalidRequest("block size must be positive")
        self.block_size = block_size
        self._objects: dict[str, _Object] = {}
        self._staging: dict[str, _Staging] = {}

    def read(self, blob: BlobInfo, offset: int = 0, length: int | None = None) -> AsyncIterator[bytes]:
        validate_key(blob.key)

        async def blocks(first: int, last: int) -> AsyncIterator[bytes]:
            stored = self._objects.get(blob.key)
            if stored is None:
                raise NotFound()
            size = blob.block_size
            for index in range(first, last + 1):
                yield bytes(stored.data[index * size : (index + 1) * size])

        return read_verified(blob, offset, length, blocks)

    def read_blocking(self, blob: BlobInfo, offset: int, length: int) -> bytes:
        return self._read_verified(blob, offset, length)

    def read_cached(self, blob: BlobInfo, offset: int, length: int) -> bytes:
        return self._read_verified(blob, offset, length)  # in memory: never waits

    def _read_verified(self, blob: BlobInfo, offset: int, length: int) -> bytes:
        stored = self._objects.get(validate_key(blob.key))
        if stored is None:
            raise NotFound()
        size = blob.block_size
        return read_verified_blocking(
            blob, offset, length, lambda index: bytes(stored.data[index * size : (index + 1) * size])
        )

    async def delete(self, key: str) -> None:
        self._objects.pop(validate_key(key), None)

    async def exists(self, key: str) -> bool:
        return validate_key(key) in self._objects

    async def iter_objects(self) -> AsyncIterator[StoredObject]:
        for key, stored in list(self._objects.items()):
            yield StoredObject(key, len(stored.data), stored.modified)

    async def check(self) -> None:
        return None

    async def close(self) -> None:
        return None

    def flip_byte(self, key: str, offset: int) -> None:
        """Test hook: invert one stored byte, to prove that reads detect corruption."""
        stored = self._objects.get(validate_key(key))
        if stored is None:
            raise NotFound()
        stored.data[offset] ^= 0xFF

    # -- staging --------------------------------------------------------------------------------------------

    async def stage_begin(self, upload_id: str, *, chunk_size: int) -> str:
        ref = validate_staging_ref(upload_id)
        if chunk_size <= 0:
            raise InvalidRequest("chunk size must be positive")
        self._staging.setdefault(ref, _Staging(chunk_size, _now()))
        return ref

    def _area(self, staging_ref: str) -> _Staging:
        area = self._staging.get(validate_staging_ref(staging_ref))
        if area is None:
            raise NotFound()
        return area

    # -- write steps ----------------------------------------------------------------------------------------

    async def _blob_sink(self, claimed_sha256: str | None) -> BlobSink:
        return _BufferSink(self)

    async def _commit_sink(
        self, staging_ref: str, chunks: Sequence[ChunkReceipt], size: int, claimed_sha256: str | None
    ) -> CommitSink:
        return _StagingBufferSink(self, staging_ref)

    async def _chunk_sink(self, staging_ref: str, index: int) -> ChunkSink:
        return _StagingBufferSink(self, staging_ref)

    async def stage_abort(self, staging_ref: str) -> None:
        self._staging.pop(validate_staging_ref(staging_ref), None)

    async def iter_staging(self) -> AsyncIterator[StagingEntry]:
        for ref, area in list(self._staging.items()):
            yield StagingEntry(ref, area.modified)

    async def sweep_temp(self, older_than: datetime, *, abandoned_before: datetime | None = None) -> int:
        return 0


class _BufferSink:
    """Bytes kept in memory until they are published as a blob."""

    def __init__(self, store: MemoryBlobStore) -> None:
        self.store = store
        self.buffer = bytearray()

    async def write(self, data: bytearray, hasher: HashingWriter | ChunkHasher) -> None:
        hasher.update(data)
        self.buffer += data

    async def publish(self, digest: StreamDigest) -> str:
        key = generation_key(digest.sha256)
        self.store._objects[key] = _Object(self.buffer, _now())
        return key

    async def discard(self) -> None:
        return None


class _StagingBufferSink(_BufferSink):
    """Bytes of one staging area: the chunks a commit joins, or one chunk to keep there."""

    def __init__(self, store: MemoryBlobStore, staging_ref: str) -> None:
        super().__init__(store)
        self.staging_ref = staging_ref
        self.area = store._area(staging_ref)

    async def append_staged(self, receipt: ChunkReceipt, writer: HashingWriter) -> None:
        staged = self.area.chunks.get(receipt.index)
        if staged is None:
            raise UploadIncomplete(missing=[receipt.index])
        check_staged(receipt, staged[1].size, staged[1].xxh3)
        writer.update(staged[0])
        self.buffer += staged[0]

    async def keep(self, receipt: ChunkReceipt) -> ChunkReceipt:
        # Looked up again: the area may have been aborted while the chunk streamed in.
        area = self.store._area(self.staging_ref)
        existing = area.chunks.get(receipt.index)
        if existing is not None:
            if existing[1] != receipt:
                raise ChunkConflict(index=receipt.index)
            return existing[1]
        area.chunks[receipt.index] = (bytes(self.buffer), receipt)
        area.modified = _now()
        return receipt

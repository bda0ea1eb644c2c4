"""In-memory backend: the same semantics as the disk and S3 backends, for tests and demos.

Writes are hashed and verified before they become visible, staging keeps receipts and refuses conflicting
resends, and reads check every storage chunk, so code tested against it behaves the same on real storage.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from blobstore.digests import ChunkHasher, HashingWriter, normalize_sha256, normalize_xxh3
from blobstore.errors import ChunkConflict, Corruption, InvalidRequest, NotFound, UploadIncomplete
from blobstore.models import BlobInfo, ChunkReceipt, StagingEntry, StoredObject
from blobstore.storage.base import DEFAULT_STORAGE_CHUNK_SIZE, ProgressCallback
from blobstore.storage.integrity import read_verified
from blobstore.storage.keys import (
    generation_key,
    validate_chunk_index,
    validate_key,
    validate_staging_ref,
)
from blobstore.storage.staging import check_commit_chunks


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


class MemoryBlobStore:
    kind = "memory"

    def __init__(self, *, storage_chunk_size: int = DEFAULT_STORAGE_CHUNK_SIZE) -> None:
        if storage_chunk_size <= 0:
            raise InvalidRequest("storage chunk size must be positive")
        self.storage_chunk_size = storage_chunk_size
        self._objects: dict[str, _Object] = {}
        self._staging: dict[str, _Staging] = {}

    async def put(
        self,
        data: AsyncIterable[bytes],
        *,
        expected_size: int | None = None,
        expected_sha256: str | None = None,
        max_size: int | None = None,
    ) -> BlobInfo:
        claimed = normalize_sha256(expected_sha256) if expected_sha256 is not None else None
        writer = HashingWriter(
            chunk_size=self.storage_chunk_size, max_size=max_size, expected_size=expected_size
        )
        buffer = bytearray()
        async for piece in data:
            writer.update(piece)
            buffer += piece
        return self._publish(buffer, writer, claimed)

    def _publish(self, buffer: bytearray, writer: HashingWriter, claimed: str | None) -> BlobInfo:
        digest = writer.finish(expected_sha256=claimed)
        key = generation_key(digest.sha256)
        self._objects[key] = _Object(buffer, _now())
        return BlobInfo(key, digest.size, digest.sha256, digest.chunk_size, digest.chunk_xxh3)

    def read(self, blob: BlobInfo, offset: int = 0, length: int | None = None) -> AsyncIterator[bytes]:
        validate_key(blob.key)

        async def chunks(first: int, last: int) -> AsyncIterator[bytes]:
            stored = self._objects.get(blob.key)
            if stored is None:
                raise NotFound()
            size = blob.chunk_size
            for index in range(first, last + 1):
                yield bytes(stored.data[index * size : (index + 1) * size])

        return read_verified(blob, offset, length, chunks)

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
        validate_chunk_index(index)
        self._area(staging_ref)
        claimed_sha = normalize_sha256(expected_sha256) if expected_sha256 is not None else None
        claimed_xxh3 = normalize_xxh3(expected_xxh3) if expected_xxh3 is not None else None
        hasher = ChunkHasher(expected_length=expected_length, max_length=max_length)
        buffer = bytearray()
        async for piece in data:
            hasher.update(piece)
            buffer += piece
        digest = hasher.finish(expected_sha256=claimed_sha, expected_xxh3=claimed_xxh3)
        receipt = ChunkReceipt(index, digest.size, digest.sha256, digest.xxh3)
        # Looked up again: the area may have been aborted while the chunk streamed in.
        area = self._area(staging_ref)
        existing = area.chunks.get(index)
        if existing is not None:
            if existing[1] != receipt:
                raise ChunkConflict(index=index)
            return existing[1]
        area.chunks[index] = (bytes(buffer), receipt)
        area.modified = _now()
        return receipt

    async def stage_commit(
        self,
        staging_ref: str,
        chunks: Sequence[ChunkReceipt],
        *,
        expected_size: int | None = None,
        expected_sha256: str | None = None,
        progress: ProgressCallback | None = None,
    ) -> BlobInfo:
        area = self._area(staging_ref)
        check_commit_chunks(chunks, expected_size)
        claimed = normalize_sha256(expected_sha256) if expected_sha256 is not None else None
        writer = HashingWriter(chunk_size=self.storage_chunk_size, expected_size=expected_size)
        buffer = bytearray()
        for receipt in chunks:
            staged = area.chunks.get(receipt.index)
            if staged is None:
                raise UploadIncomplete(missing=[receipt.index])
            if staged[1].size != receipt.size or staged[1].xxh3 != receipt.xxh3:
                raise Corruption(chunk=receipt.index)
            writer.update(staged[0])
            buffer += staged[0]
            if progress is not None:
                await progress(writer.size)
        return self._publish(buffer, writer, claimed)

    async def stage_abort(self, staging_ref: str) -> None:
        self._staging.pop(validate_staging_ref(staging_ref), None)

    async def iter_staging(self) -> AsyncIterator[StagingEntry]:
        for ref, area in list(self._staging.items()):
            yield StagingEntry(ref, area.modified)

    async def sweep_temp(self, older_than: datetime, *, abandoned_before: datetime | None = None) -> int:
        return 0

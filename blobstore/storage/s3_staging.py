"""Staged chunks on S3: one object per index *and content*, and the commit that joins them.

A staging area is the key prefix ``staging/<upload_id>/``. Every attempt at a chunk with different bytes gets
its own key (``<index>.<sha256>``), so a conflicting resend can never replace the copy the metadata database
recorded first, whether or not the endpoint honours ``If-None-Match``; the commit reads exactly the recorded
copy. A commit copies big staged chunks server-side with ``UploadPartCopy`` and falls back to ``UploadPart``
with the bytes where the endpoint lacks it.
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from typing import IO, Any

from blobstore.digests import ChunkHasher, HashingWriter, StagedCheck
from blobstore.errors import ChunkConflict, StorageUnavailable, UploadIncomplete
from blobstore.models import ChunkReceipt, StagingEntry
from blobstore.storage.keys import validate_staging_ref
from blobstore.storage.s3_client import BucketClient, read_and_hash, rewound
from blobstore.storage.s3_multipart import (
    MIN_PART_SIZE,
    MULTIPART_MARKER,
    PartSink,
    abort_upload,
    read_marker,
)
from blobstore.storage.staging import check_staged

STAGING_DIR = "staging"


def staging_prefix(s3: BucketClient, staging_ref: str) -> str:
    return s3.object_key(f"{STAGING_DIR}/{validate_staging_ref(staging_ref)}/")


def chunk_key(prefix: str, index: int, sha256: str) -> str:
    """The staging key of one content of chunk ``index``: each distinct content has its own."""
    return f"{prefix}{index}.{sha256}"


async def abort_area(s3: BucketClient, staging_ref: str) -> None:
    """Free a staging area: the multipart upload its marker names, then every object under it."""
    prefix = staging_prefix(s3, staging_ref)
    marker = await read_marker(s3, prefix + MULTIPART_MARKER)
    if marker is not None:
        await abort_upload(s3, marker["key"], marker["upload_id"], may_be_complete=True)
    keys = [item["Key"] async for item in s3.list_objects(prefix)]
    for start in range(0, len(keys), 1000):
        batch = [{"Key": k} for k in keys[start : start + 1000]]
        response = await s3.call("delete_objects", Delete={"Objects": batch, "Quiet": True})
        if response.get("Errors"):
            raise StorageUnavailable()


async def iter_areas(s3: BucketClient) -> AsyncIterator[StagingEntry]:
    root = s3.object_key(f"{STAGING_DIR}/")
    newest: dict[str, datetime] = {}
    async for item in s3.list_objects(root):
        ref = item["Key"][len(root) :].split("/", 1)[0]
        modified: datetime = item["LastModified"]
        if ref not in newest or modified > newest[ref]:
            newest[ref] = modified
    for ref, modified in newest.items():
        yield StagingEntry(ref, modified)


class StagedChunk:
    """A staged chunk read back, hashed into the commit's writer and checked against its receipt.

    It is the copy the receipt (the metadata's record) names, under its content's own key; uploads staged
    before that layout kept the chunk under its bare index, which is read when the content key is missing.
    """

    def __init__(self, s3: BucketClient, prefix: str, receipt: ChunkReceipt, writer: HashingWriter) -> None:
        self.s3 = s3
        self.object_key = chunk_key(prefix, receipt.index, receipt.sha256)
        self.legacy_key = prefix + str(receipt.index)
        self.receipt = receipt
        self.writer = writer
        self.etag: str | None = None

    async def _open(self) -> Any:
        for object_key in (self.object_key, self.legacy_key):
            response = await self.s3.raw_or_none("get_object", Key=object_key)
            if response is not None:
                self.object_key = object_key
                return response
        raise UploadIncomplete(missing=[self.receipt.index])

    async def pieces(self, *, hash_into_commit: bool = True) -> AsyncIterator[bytes]:
        """The chunk's bytes, hashed into the commit's writer unless ``hash_into_commit`` is false."""
        response = await self._open()
        self.etag = response.get("ETag")
        body = response["Body"]
        check = StagedCheck()
        writer = self.writer if hash_into_commit else None
        try:
            while piece := await self.s3.run(read_and_hash, body, writer, check):
                yield piece
        finally:
            body.close()
        check_staged(self.receipt, check.size, check.xxh3())


class CommitSink(PartSink):
    """Joins the staged chunks of one area; a chunk that can be a part on its own is copied server-side.

    A commit bigger than a part starts its multipart upload with the first chunk and leaves a marker naming it
    in the staging area, so that an abort from any replica can find it.
    """

    def __init__(
        self,
        s3: BucketClient,
        key: str,
        part_size: int,
        prefix: str,
        chunks: Sequence[ChunkReceipt],
        size: int,
    ) -> None:
        super().__init__(s3, key, part_size)
        self.prefix = prefix
        self.marker = prefix + MULTIPART_MARKER
        self.last_index = len(chunks) - 1
        self.sends_parts = size > part_size
        self.marked = False

    async def _start(self) -> None:
        await self.upload.start()
        self.marked = True
        await self.upload.mark(self.marker)

    async def append_staged(self, receipt: ChunkReceipt, writer: HashingWriter) -> None:
        if self.sends_parts and not self.upload.started:
            await self._start()
        staged = StagedChunk(self.s3, self.prefix, receipt, writer)
        own_part = receipt.size > 0 and (receipt.size >= MIN_PART_SIZE or receipt.index == self.last_index)
        if self.sends_parts and not self.pending and own_part and self.s3.upload_part_copy:
            # Big enough to be a part on its own: read it only to hash it, and let S3 copy the bytes.
            async for _ in staged.pieces():
                pass
            if await self.upload.copy(staged.object_key, staged.etag):
                return
            # No UploadPartCopy on this endpoint: send the (already hashed) bytes instead.
            async for piece in staged.pieces(hash_into_commit=False):
                await self.send_full_parts(piece)
            return
        # Small chunks are joined into parts of at least the S3 minimum.
        async for piece in staged.pieces():
            await self.send_full_parts(piece)

    async def discard(self) -> None:
        await super().discard()
        if self.marked:
            await self.s3.call("delete_object", Key=self.marker)


class SpoolSink:
    """One upload chunk, spooled so that memory stays bounded whatever its size, and sent once verified."""

    def __init__(self, s3: BucketClient, prefix: str, spool_size: int) -> None:
        self.s3 = s3
        self.prefix = prefix
        self.spool = tempfile.SpooledTemporaryFile(max_size=spool_size)  # noqa: SIM115 - closed by discard

    async def write(self, data: bytearray, hasher: ChunkHasher) -> None:
        await self.s3.run(_hash_and_spool, hasher, self.spool, data)

    async def keep(self, receipt: ChunkReceipt) -> ChunkReceipt:
        object_key = chunk_key(self.prefix, receipt.index, receipt.sha256)
        # Another copy of this index with other bytes: refused here, and never replaced, since every content
        # has its own key. Two different copies racing both land; the metadata database keeps the first one
        # recorded and the commit reads exactly that one.
        async for item in self.s3.list_objects(f"{self.prefix}{receipt.index}."):
            if item["Key"] != object_key:
                raise ChunkConflict(index=receipt.index)
        metadata = {"sha256": receipt.sha256, "xxh3": receipt.xxh3}
        await self.s3.call(
            "put_object",
            Key=object_key,
            Body=rewound(self.spool),
            ContentLength=receipt.size,
            Metadata=metadata,
        )
        return receipt

    async def discard(self) -> None:
        self.spool.close()


def _hash_and_spool(hasher: ChunkHasher, spool: IO[bytes], data: bytearray) -> None:
    hasher.update(data)
    spool.write(data)

"""S3 backend (boto3, any S3-compatible endpoint through ``endpoint_url``).

Object layout under ``<prefix>/``::

    blobs/<ab>/<cd>/<sha256>.<suffix>    generations whose digest was claimed before the upload
    blobs/_/<r[0:2]>/<r>                 generations whose digest was only known once uploaded
    staging/<upload_id>/<index>.<sha256> staged chunks, one key per distinct content of an index
    staging/<upload_id>/multipart        the multipart upload a commit has open, so an abort can find it
    probe/<random>                       written and removed by :meth:`S3BlobStore.probe` at start

A write streams into a multipart upload (or one ``PutObject`` when it fits in one part) directly at its final
generation key and is only completed after its size and digest are verified, so nothing is ever copied again
after completion and a refused write leaves nothing visible. New keys are written with ``If-None-Match: *``
where the endpoint supports it, so nothing is ever overwritten.

Correctness relies on no optional S3 feature. Every attempt at a staged chunk with different bytes gets its
own key, so a conflicting resend can never replace the copy the metadata database recorded first, whether or
not the endpoint honours ``If-None-Match``; the commit reads exactly the recorded copy. A commit copies big
staged chunks server-side with ``UploadPartCopy`` and falls back to ``UploadPart`` with the bytes where the
endpoint lacks it. Where ``AbortMultipartUpload`` is missing, an unwanted multipart upload is discarded by
completing it with a single empty part and deleting the result, so no part is left behind.

The modules beside this one hold the parts: ``s3_client`` (the client of one bucket and its error
mapping), ``s3_probe`` (what the endpoint supports), ``s3_multipart`` (multipart assembly), ``s3_staging``
(staged chunks and their commit) and ``s3_direct`` (presigned part uploads).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from blobstore.disposition import content_disposition
from blobstore.errors import Corruption, InvalidRequest
from blobstore.models import BlobInfo, ChunkReceipt, StagingEntry, StoredObject
from blobstore.storage.base import DEFAULT_BLOCK_SIZE, DirectPart, ProgressCallback
from blobstore.storage.integrity import block_length, read_verified
from blobstore.storage.keys import (
    BLOB_DIR,
    generation_key,
    is_generation_key,
    validate_key,
    validate_staging_ref,
)
from blobstore.storage.s3_client import BucketClient, error_code, new_client, read_exact, s3_error
from blobstore.storage.s3_direct import DirectUploads
from blobstore.storage.s3_multipart import DEFAULT_PART_SIZE, MIN_PART_SIZE, PartSink, abort_stale_uploads
from blobstore.storage.s3_probe import S3Capabilities, head_bucket, probe
from blobstore.storage.s3_staging import CommitSink as S3CommitSink
from blobstore.storage.s3_staging import SpoolSink, abort_area, iter_areas, staging_prefix
from blobstore.storage.writes import BlobSink, ChunkSink, CommitSink, StagedWrites

if TYPE_CHECKING:
    from mypy_boto3_s3.client import S3Client

__all__ = ["MIN_PART_SIZE", "S3BlobStore", "S3Capabilities"]

MAX_PRESIGN_SECONDS = 7 * 24 * 3600


class S3BlobStore(StagedWrites):
    kind = "s3"

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        block_size: int = DEFAULT_BLOCK_SIZE,
        io_threads: int = 8,
        part_size: int = DEFAULT_PART_SIZE,
        conditional_writes: bool = True,
        client: S3Client | None = None,
    ) -> None:
        if not bucket or "/" in bucket:
            raise InvalidRequest("malformed S3 bucket name")
        if part_size < MIN_PART_SIZE:
            raise InvalidRequest("S3 part size must be at least 5 MiB")
        if block_size <= 0 or io_threads <= 0:
            raise InvalidRequest("block size and io threads must be positive")
        self._s3 = BucketClient(
            bucket,
            prefix,
            client=client or new_client(endpoint_url, region, io_threads),
            io_threads=io_threads,
            conditional_writes=conditional_writes,
        )
        self.bucket = bucket
        self.prefix = self._s3.prefix
        self.block_size = block_size
        self.part_size = part_size
        self._direct = DirectUploads(self._s3, block_size)

    @property
    def client(self) -> S3Client:
        return self._s3.client

    @property
    def conditional_writes(self) -> bool:
        """False once the endpoint has answered ``If-None-Match`` with NotImplemented."""
        return self._s3.conditional_writes

    # -- writes ---------------------------------------------------------------------------------------------

    async def _blob_sink(self, claimed_sha256: str | None) -> BlobSink:
        return PartSink(self._s3, generation_key(claimed_sha256), self.part_size)

    async def _commit_sink(
        self, staging_ref: str, chunks: Sequence[ChunkReceipt], size: int, claimed_sha256: str | None
    ) -> CommitSink:
        prefix = staging_prefix(self._s3, staging_ref)
        return S3CommitSink(self._s3, generation_key(claimed_sha256), self.part_size, prefix, chunks, size)

    async def _chunk_sink(self, staging_ref: str, index: int) -> ChunkSink:
        return SpoolSink(self._s3, staging_prefix(self._s3, staging_ref), self.part_size)

    # -- reads ----------------------------------------------------------------------------------------------

    def read(self, blob: BlobInfo, offset: int = 0, length: int | None = None) -> AsyncIterator[bytes]:
        object_key = self._s3.object_key(validate_key(blob.key))

        async def blocks(first: int, last: int) -> AsyncIterator[bytes]:
            start = first * blob.block_size
            end = start + sum(block_length(blob, i) for i in range(first, last + 1)) - 1
            try:
                response = await self._s3.raw("get_object", Key=object_key, Range=f"bytes={start}-{end}")
            except ClientError as exc:
                if error_code(exc) == "InvalidRange":
                    raise Corruption(chunk=first) from exc  # the object is shorter than its record
                raise s3_error(exc) from exc
            body = response["Body"]
            try:
                for index in range(first, last + 1):
                    yield await self._s3.run(read_exact, body, block_length(blob, index))
            finally:
                body.close()

        return read_verified(blob, offset, length, blocks)

    async def delete(self, key: str) -> None:
        await self._s3.call("delete_object", Key=self._s3.object_key(validate_key(key)))

    async def exists(self, key: str) -> bool:
        return await self._s3.head(self._s3.object_key(validate_key(key))) is not None

    async def iter_objects(self) -> AsyncIterator[StoredObject]:
        skip = len(self._s3.object_key(""))
        async for item in self._s3.list_objects(self._s3.object_key(f"{BLOB_DIR}/")):
            key = item["Key"][skip:]
            if is_generation_key(key):
                yield StoredObject(key, int(item["Size"]), item["LastModified"])

    @property
    def location(self) -> str:
        """Bucket, prefix and endpoint, for messages (no credentials)."""
        return self._s3.location

    async def check(self) -> None:
        """Readiness: the bucket answers. The failure names the bucket and endpoint, never credentials."""
        await head_bucket(self._s3, "is not reachable")

    async def probe(self) -> S3Capabilities:
        """Check at start that the bucket exists and is writable, and find out what the endpoint supports
        (``blobstore.storage.s3_probe``)."""
        return await probe(self._s3)

    async def close(self) -> None:
        self._s3.client.close()

    async def presigned_url(
        self,
        blob: BlobInfo,
        *,
        expires_in: int,
        filename: str | None = None,
        content_type: str | None = None,
    ) -> str:
        if not 0 < expires_in <= MAX_PRESIGN_SECONDS:
            raise InvalidRequest("presigned URL lifetime must be between 1 second and 7 days")
        params = {"Bucket": self.bucket, "Key": self._s3.object_key(validate_key(blob.key))}
        if filename is not None:
            params["ResponseContentDisposition"] = content_disposition(filename)
        if content_type is not None:
            params["ResponseContentType"] = content_type
        url: str = await self._s3.run(
            self._s3.client.generate_presigned_url, "get_object", Params=params, ExpiresIn=expires_in
        )
        return url

    # -- direct uploads (blobstore.storage.s3_direct) --------------------------------------------------------

    async def direct_begin(self, upload_id: str, *, sha256: str) -> str:
        return await self._direct.begin(upload_id, sha256=sha256)

    async def direct_parts(
        self, staging_ref: str, numbers: Sequence[int], *, part_size: int, size: int, expires_in: int
    ) -> list[DirectPart]:
        return await self._direct.parts(
            staging_ref, numbers, part_size=part_size, size=size, expires_in=expires_in
        )

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
        return await self._direct.commit(
            staging_ref,
            part_size=part_size,
            expected_size=expected_size,
            expected_sha256=expected_sha256,
            progress=progress,
            part_etags=part_etags,
        )

    async def direct_restart(self, staging_ref: str, *, sha256: str) -> None:
        await self._direct.restart(staging_ref, sha256=sha256)

    # -- cleanup --------------------------------------------------------------------------------------------

    async def abort_stale_multipart_uploads(self, older_than: datetime) -> int:
        """Abort multipart uploads under the prefix started before ``older_than``; returns how many."""
        return await abort_stale_uploads(self._s3, older_than)

    async def sweep_temp(self, older_than: datetime, *, abandoned_before: datetime | None = None) -> int:
        """Interrupted puts leave only multipart uploads behind; abort the stale ones."""
        return await self.abort_stale_multipart_uploads(older_than)

    # -- staging (blobstore.storage.s3_staging) --------------------------------------------------------------

    async def stage_begin(self, upload_id: str, *, chunk_size: int) -> str:
        if chunk_size <= 0:
            raise InvalidRequest("chunk size must be positive")
        return validate_staging_ref(upload_id)

    async def stage_abort(self, staging_ref: str) -> None:
        await abort_area(self._s3, staging_ref)

    def iter_staging(self) -> AsyncIterator[StagingEntry]:
        return iter_areas(self._s3)

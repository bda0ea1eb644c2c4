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
:meth:`S3BlobStore.probe` finds out at start what the endpoint supports.
"""

from __future__ import annotations

import functools
import json
import logging
import secrets
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import IO, TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.to_thread
import boto3
import botocore.loaders
import botocore.session
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from urllib3.exceptions import HTTPError as Urllib3Error

from blobstore.digests import ChunkHasher, HashingWriter, StagedCheck, StreamDigest
from blobstore.disposition import content_disposition
from blobstore.errors import (
    BlobstoreError,
    ChunkConflict,
    Conflict,
    Corruption,
    InvalidRequest,
    NotFound,
    StorageUnavailable,
    TooLarge,
    UploadIncomplete,
    from_os_error,
)
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
from blobstore.storage.local import without_path
from blobstore.storage.staging import check_staged
from blobstore.storage.writes import BlobSink, ChunkSink, CommitSink, StagedWrites

if TYPE_CHECKING:
    from mypy_boto3_s3.client import S3Client

    from blobstore.storage.s3_direct import DirectUploads

T = TypeVar("T")

logger = logging.getLogger("blobstore.storage.s3")

MIN_PART_SIZE = 5 * 1024 * 1024
"""S3's minimum size for every part of a multipart upload but the last."""
DEFAULT_PART_SIZE = 8 * 1024 * 1024
MAX_PRESIGN_SECONDS = 7 * 24 * 3600
STAGING_DIR = "staging"
MULTIPART_MARKER = "multipart"
PROBE_DIR = "probe"
_READ_PIECE = 1024 * 1024
_NOT_FOUND_CODES = frozenset({"NoSuchKey", "NotFound", "NoSuchUpload", "404"})
_EXISTS_CODES = frozenset({"PreconditionFailed", "ConditionalRequestConflict", "412", "409"})
_UNSUPPORTED_CODES = frozenset({"NotImplemented", "501"})
_NO_ABORT_CODES = frozenset({"NotImplemented", "501", "MethodNotAllowed", "405"})
_TRANSPORT_ERRORS = (BotoCoreError, Urllib3Error, OSError)


def error_code(exc: ClientError) -> str:
    # HEAD responses have no body, so botocore reports their status as the code.
    return str(exc.response.get("Error", {}).get("Code", ""))


def s3_error(exc: Exception, operation: str | None = None) -> BlobstoreError:
    """Map a botocore error onto the catalogue: a missing object is ``NotFound``, the rest unavailable.

    ``StorageUnavailable`` carries the S3 operation and the endpoint's error code (or the transport error's
    class) for the logs, and is logged here with them: never credentials, keys' content or response bodies.
    """
    if isinstance(exc, ClientError):
        code = error_code(exc)
        if code in _NOT_FOUND_CODES:
            return NotFound()
        if code == "EntityTooLarge":
            return TooLarge()
        if code in _EXISTS_CODES:
            return Conflict()
        operation = exc.operation_name or operation
    else:
        code = type(exc).__name__
    logger.warning("S3 %s failed: %s", operation or "request", code)
    return StorageUnavailable(operation=operation, backend_code=code)


_WORKER_OPERATIONS = {
    "_read_exact": "GetObject",
    "_read_and_hash": "GetObject",
    "_read_all_and_close": "GetObject",
}


def _operation_name(method: str) -> str:
    """``upload_part_copy`` -> ``UploadPartCopy``, as S3 names its operations."""
    if method in _WORKER_OPERATIONS:
        return _WORKER_OPERATIONS[method]
    return "".join(word.capitalize() for word in method.strip("_").split("_"))


@dataclass(frozen=True, slots=True)
class S3Capabilities:
    """What :meth:`S3BlobStore.probe` found the endpoint to support."""

    conditional_writes: bool
    """``If-None-Match: *`` refuses to replace an existing object."""
    upload_part_copy: bool
    abort_multipart_upload: bool


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
        self.bucket = bucket
        self.prefix = _normalize_prefix(prefix)
        self.block_size = block_size
        self.part_size = part_size
        self._conditional = conditional_writes
        self._part_copy = True
        self._abort = True
        self._limiter = anyio.CapacityLimiter(io_threads)
        self._client: S3Client = client or _new_client(endpoint_url, region, io_threads)

    @property
    def client(self) -> S3Client:
        return self._client

    @property
    def conditional_writes(self) -> bool:
        """False once the endpoint has answered ``If-None-Match`` with NotImplemented."""
        return self._conditional

    # -- plumbing -------------------------------------------------------------------------------------------

    def _object_key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _staging_prefix(self, staging_ref: str) -> str:
        return self._object_key(f"{STAGING_DIR}/{validate_staging_ref(staging_ref)}/")

    async def _run(self, func: Any, *args: Any, **kwargs: Any) -> Any:
        """Run a blocking call in a worker thread; S3 and transport errors come back translated."""
        try:
            return await anyio.to_thread.run_sync(
                functools.partial(func, *args, **kwargs), limiter=self._limiter
            )
        except (ClientError, BotoCoreError, Urllib3Error) as exc:
            raise s3_error(exc, _operation_name(getattr(func, "__name__", "request"))) from exc
        except OSError as exc:  # the local spool of a staged chunk
            raise from_os_error(exc) from without_path(exc)

    async def _raw(self, operation: str, **kwargs: Any) -> Any:
        """One S3 call, with ``ClientError`` left untranslated for callers that branch on its code."""
        try:
            return await anyio.to_thread.run_sync(
                functools.partial(getattr(self._client, operation), Bucket=self.bucket, **kwargs),
                limiter=self._limiter,
            )
        except _TRANSPORT_ERRORS as exc:
            raise s3_error(exc, _operation_name(operation)) from exc

    async def _call(self, operation: str, **kwargs: Any) -> Any:
        try:
            return await self._raw(operation, **kwargs)
        except ClientError as exc:
            raise s3_error(exc) from exc

    async def _head(self, object_key: str) -> dict[str, Any] | None:
        try:
            response: dict[str, Any] = await self._raw("head_object", Key=object_key)
        except ClientError as exc:
            if error_code(exc) in _NOT_FOUND_CODES:
                return None
            raise s3_error(exc) from exc
        return response

    async def _put_new(self, object_key: str, body: bytes | IO[bytes], **extra: Any) -> bool:
        """``PutObject`` that never replaces an object: False when ``object_key`` already exists.

        Endpoints without conditional writes get a HEAD first; the race that leaves is closed by random keys
        for blobs, and for staged chunks only matters to two resends racing with different bytes.
        """
        if self._conditional:
            try:
                await self._raw("put_object", Key=object_key, Body=_rewound(body), IfNoneMatch="*", **extra)
                return True
            except ClientError as exc:
                code = error_code(exc)
                if code in _EXISTS_CODES:
                    return False
                if code not in _UNSUPPORTED_CODES:
                    raise s3_error(exc) from exc
                self._conditional = False
        if await self._head(object_key) is not None:
            return False
        await self._call("put_object", Key=object_key, Body=_rewound(body), **extra)
        return True

    # -- writes ---------------------------------------------------------------------------------------------

    async def _blob_sink(self, claimed_sha256: str | None) -> BlobSink:
        return _PartSink(self, generation_key(claimed_sha256))

    async def _commit_sink(
        self, staging_ref: str, chunks: Sequence[ChunkReceipt], size: int, claimed_sha256: str | None
    ) -> CommitSink:
        return _CommitSink(
            self, generation_key(claimed_sha256), self._staging_prefix(staging_ref), chunks, size
        )

    async def _chunk_sink(self, staging_ref: str, index: int) -> ChunkSink:
        return _SpoolSink(self, self._staging_prefix(staging_ref))

    async def _publish_small(self, key: str, body: bytes) -> None:
        if not await self._put_new(self._object_key(key), body, ContentType="application/octet-stream"):
            # Random 128-bit suffixes never collide in practice; a clash means something else writes here.
            raise Conflict()

    # -- reads ----------------------------------------------------------------------------------------------

    def read(self, blob: BlobInfo, offset: int = 0, length: int | None = None) -> AsyncIterator[bytes]:
        object_key = self._object_key(validate_key(blob.key))

        async def blocks(first: int, last: int) -> AsyncIterator[bytes]:
            start = first * blob.block_size
            end = start + sum(block_length(blob, i) for i in range(first, last + 1)) - 1
            try:
                response = await self._raw("get_object", Key=object_key, Range=f"bytes={start}-{end}")
            except ClientError as exc:
                if error_code(exc) == "InvalidRange":
                    raise Corruption(chunk=first) from exc  # the object is shorter than its record
                raise s3_error(exc) from exc
            body = response["Body"]
            try:
                for index in range(first, last + 1):
                    yield await self._run(_read_exact, body, block_length(blob, index))
            finally:
                body.close()

        return read_verified(blob, offset, length, blocks)

    async def delete(self, key: str) -> None:
        await self._call("delete_object", Key=self._object_key(validate_key(key)))

    async def exists(self, key: str) -> bool:
        return await self._head(self._object_key(validate_key(key))) is not None

    async def iter_objects(self) -> AsyncIterator[StoredObject]:
        skip = len(self._object_key(""))
        async for item in self._list(self._object_key(f"{BLOB_DIR}/")):
            key = item["Key"][skip:]
            if is_generation_key(key):
                yield StoredObject(key, int(item["Size"]), item["LastModified"])

    async def _list(self, prefix: str) -> AsyncIterator[dict[str, Any]]:
        token: str | None = None
        while True:
            extra = {"ContinuationToken": token} if token else {}
            page = await self._call("list_objects_v2", Prefix=prefix, **extra)
            for item in page.get("Contents", []):
                yield item
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return

    @property
    def location(self) -> str:
        """Bucket, prefix and endpoint, for messages (no credentials)."""
        where = f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"
        return f"{where} at {self._client.meta.endpoint_url}"

    async def check(self) -> None:
        """Readiness: the bucket answers. The failure names the bucket and endpoint, never credentials."""
        await self._head_bucket("is not reachable")

    async def _head_bucket(self, what: str) -> None:
        try:
            await self._raw("head_bucket")
        except ClientError as exc:
            code = error_code(exc)
            # HEAD answers have no body: a missing bucket is a bare 404.
            code = "NoSuchBucket" if code in ("404", "NoSuchBucket") else code
            logger.warning("S3 HeadBucket on %s failed: %s", self.location, code)
            raise StorageUnavailable(
                f"S3 bucket {self.location} {what} (HeadBucket: {code})",
                operation="HeadBucket",
                backend_code=code,
            ) from exc
        except StorageUnavailable as exc:
            raise self._unavailable(exc, what) from exc

    def _unavailable(self, exc: BlobstoreError, what: str) -> StorageUnavailable:
        operation = getattr(exc, "operation", None)
        code = getattr(exc, "backend_code", None) or exc.code
        reason = f" ({operation}: {code})" if operation else f" ({code})"
        return StorageUnavailable(
            f"S3 bucket {self.location} {what}{reason}", operation=operation, backend_code=code
        )

    async def probe(self) -> S3Capabilities:
        """Check at start that the bucket exists and is writable, and find out what the endpoint supports.

        Writes, rewrites and deletes a small object under ``<prefix>/probe/``, and runs a one-part multipart
        upload there that it either aborts or, where aborting is missing, completes and deletes, so nothing
        stays behind. Raises ``StorageUnavailable`` naming the bucket and endpoint when it is not usable.
        """
        source = self._object_key(f"{PROBE_DIR}/{secrets.token_hex(8)}")
        target = source + ".multipart"
        await self._head_bucket("does not exist or is not reachable")
        try:
            await self._call("put_object", Key=source, Body=b"probe")
        except BlobstoreError as exc:
            raise self._unavailable(exc, "is not writable") from exc
        try:
            try:
                await self._raw("put_object", Key=source, Body=b"again", IfNoneMatch="*")
                replaced = True
            except ClientError as exc:
                if error_code(exc) not in _EXISTS_CODES | _UNSUPPORTED_CODES:
                    raise s3_error(exc) from exc
                replaced = error_code(exc) in _UNSUPPORTED_CODES
            upload = _Multipart(self, target)
            try:
                await upload.start()
                try:
                    await self._raw(
                        "upload_part_copy",
                        Key=target,
                        UploadId=upload.upload_id,
                        PartNumber=1,
                        CopySource={"Bucket": self.bucket, "Key": source},
                    )
                    self._part_copy = True
                except ClientError as exc:
                    if error_code(exc) not in _UNSUPPORTED_CODES:
                        raise s3_error(exc) from exc
                    self._part_copy = False
                await upload.abort()
            finally:
                await self._call("delete_object", Key=target)
        except BlobstoreError as exc:
            raise self._unavailable(exc, "failed the capability probe") from exc
        finally:
            with anyio.CancelScope(shield=True):
                await self._call("delete_object", Key=source)
        self._conditional = self._conditional and not replaced
        capabilities = S3Capabilities(self._conditional, self._part_copy, self._abort)
        logger.info(
            "S3 bucket %s: conditional writes %s, UploadPartCopy %s, AbortMultipartUpload %s",
            self.location,
            *(
                "yes" if flag else "no"
                for flag in (
                    capabilities.conditional_writes,
                    capabilities.upload_part_copy,
                    capabilities.abort_multipart_upload,
                )
            ),
        )
        return capabilities

    async def close(self) -> None:
        self._client.close()

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
        params = {"Bucket": self.bucket, "Key": self._object_key(validate_key(blob.key))}
        if filename is not None:
            params["ResponseContentDisposition"] = content_disposition(filename)
        if content_type is not None:
            params["ResponseContentType"] = content_type
        url: str = await self._run(
            self._client.generate_presigned_url, "get_object", Params=params, ExpiresIn=expires_in
        )
        return url

    # -- direct uploads (blobstore.storage.s3_direct) --------------------------------------------------------

    def _direct(self) -> DirectUploads:
        from blobstore.storage.s3_direct import DirectUploads  # it builds on this module

        return DirectUploads(self)

    async def direct_begin(self, upload_id: str, *, sha256: str) -> str:
        return await self._direct().begin(upload_id, sha256=sha256)

    async def direct_parts(
        self, staging_ref: str, numbers: Sequence[int], *, part_size: int, size: int, expires_in: int
    ) -> list[DirectPart]:
        return await self._direct().parts(
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
        return await self._direct().commit(
            staging_ref,
            part_size=part_size,
            expected_size=expected_size,
            expected_sha256=expected_sha256,
            progress=progress,
            part_etags=part_etags,
        )

    async def direct_restart(self, staging_ref: str, *, sha256: str) -> None:
        await self._direct().restart(staging_ref, sha256=sha256)

    # -- cleanup --------------------------------------------------------------------------------------------

    async def abort_stale_multipart_uploads(self, older_than: datetime) -> int:
        """Abort multipart uploads under the prefix started before ``older_than``; returns how many."""
        aborted = 0
        markers: dict[str, str] = {}
        while True:
            try:
                page = await self._raw("list_multipart_uploads", Prefix=self._object_key(""), **markers)
            except ClientError as exc:
                if error_code(exc) not in _UNSUPPORTED_CODES:
                    raise s3_error(exc) from exc
                # Such endpoints cannot list what an interrupted process left; every upload this store
                # starts is completed or discarded by the process that started it.
                logger.info(
                    "S3 ListMultipartUploads is not supported (%s): no stale uploads to sweep",
                    error_code(exc),
                )
                return aborted
            for upload in page.get("Uploads", []):
                if await self._last_activity(upload) < older_than:
                    await self._abort_upload(upload["Key"], upload["UploadId"])
                    aborted += 1
            if not page.get("IsTruncated"):
                return aborted
            markers = {"KeyMarker": page["NextKeyMarker"], "UploadIdMarker": page["NextUploadIdMarker"]}

    async def _last_activity(self, upload: dict[str, Any]) -> datetime:
        """When a multipart upload was last written to: its start or its newest part.

        Some endpoints (moto) report a fixed ``Initiated`` time, and a long commit keeps adding parts long
        after it started, so the newest part's time is what tells an abandoned upload from a busy one.
        """
        newest: datetime = upload["Initiated"]
        try:
            parts = await self._raw(
                "list_parts", Key=upload["Key"], UploadId=upload["UploadId"], MaxParts=1000
            )
        except ClientError as exc:
            if error_code(exc) in _NOT_FOUND_CODES | _NO_ABORT_CODES:
                return newest
            raise s3_error(exc) from exc
        for part in parts.get("Parts", []):
            newest = max(newest, part["LastModified"])
        return newest

    async def _abort_upload(self, object_key: str, upload_id: str, *, may_be_complete: bool = False) -> None:
        """Abort (or, lacking AbortMultipartUpload, discard) a multipart upload; a missing one is fine.

        ``may_be_complete``: the upload may have been completed already (a commit's marker outlived it), and
        its object is then a published blob that discarding must not touch.
        """
        if self._abort:
            try:
                await self._raw("abort_multipart_upload", Key=object_key, UploadId=upload_id)
                return
            except ClientError as exc:
                code = error_code(exc)
                if code in _NOT_FOUND_CODES:
                    return
                if code not in _NO_ABORT_CODES:
                    raise s3_error(exc) from exc
                self._abort = False
                logger.warning(
                    "S3 AbortMultipartUpload is not supported (%s): "
                    "unwanted uploads are completed, then deleted",
                    code,
                )
        if may_be_complete and await self._head(object_key) is not None:
            return
        await self._discard_upload(object_key, upload_id)

    async def _discard_upload(self, object_key: str, upload_id: str) -> None:
        """Free a multipart upload without ``AbortMultipartUpload``.

        Part 1 is replaced by an empty part and the upload completed with it alone (S3 drops every part a
        completion does not list), then the resulting empty object is deleted. ``object_key`` is the upload's
        own random generation key, never a published blob's.
        """
        try:
            part = await self._raw("upload_part", Key=object_key, UploadId=upload_id, PartNumber=1, Body=b"")
            await self._raw(
                "complete_multipart_upload",
                Key=object_key,
                UploadId=upload_id,
                MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
            )
        except ClientError as exc:
            if error_code(exc) in _NOT_FOUND_CODES:
                return
            raise s3_error(exc) from exc
        await self._call("delete_object", Key=object_key)

    async def sweep_temp(self, older_than: datetime, *, abandoned_before: datetime | None = None) -> int:
        """Interrupted puts leave only multipart uploads behind; abort the stale ones."""
        return await self.abort_stale_multipart_uploads(older_than)

    # -- staging --------------------------------------------------------------------------------------------

    async def stage_begin(self, upload_id: str, *, chunk_size: int) -> str:
        if chunk_size <= 0:
            raise InvalidRequest("chunk size must be positive")
        return validate_staging_ref(upload_id)

    async def stage_abort(self, staging_ref: str) -> None:
        prefix = self._staging_prefix(staging_ref)
        marker = await self._read_marker(prefix + MULTIPART_MARKER)
        if marker is not None:
            await self._abort_upload(marker["key"], marker["upload_id"], may_be_complete=True)
        keys = [item["Key"] async for item in self._list(prefix)]
        for start in range(0, len(keys), 1000):
            batch = [{"Key": k} for k in keys[start : start + 1000]]
            response = await self._call("delete_objects", Delete={"Objects": batch, "Quiet": True})
            if response.get("Errors"):
                raise StorageUnavailable()

    async def _read_marker(self, object_key: str) -> dict[str, str] | None:
        try:
            response = await self._raw("get_object", Key=object_key)
        except ClientError as exc:
            if error_code(exc) in _NOT_FOUND_CODES:
                return None
            raise s3_error(exc) from exc
        raw = await self._run(_read_all_and_close, response["Body"])
        record = json.loads(raw)
        if not isinstance(record, dict) or not record.get("key", "").startswith(self._object_key(BLOB_DIR)):
            raise Corruption()
        return {"key": str(record["key"]), "upload_id": str(record["upload_id"])}

    async def iter_staging(self) -> AsyncIterator[StagingEntry]:
        root = self._object_key(f"{STAGING_DIR}/")
        newest: dict[str, datetime] = {}
        async for item in self._list(root):
            ref = item["Key"][len(root) :].split("/", 1)[0]
            modified: datetime = item["LastModified"]
            if ref not in newest or modified > newest[ref]:
                newest[ref] = modified
        for ref, modified in newest.items():
            yield StagingEntry(ref, modified)


class _StagedChunk:
    """A staged chunk read back, hashed into the commit's writer and checked against its receipt.

    It is the copy the receipt (the metadata's record) names, under its content's own key; uploads staged
    before that layout kept the chunk under its bare index, which is read when the content key is missing.
    """

    def __init__(self, store: S3BlobStore, prefix: str, receipt: ChunkReceipt, writer: HashingWriter) -> None:
        self.store = store
        self.object_key = _chunk_key(prefix, receipt.index, receipt.sha256)
        self.legacy_key = prefix + str(receipt.index)
        self.receipt = receipt
        self.writer = writer
        self.etag: str | None = None

    async def _open(self) -> Any:
        for object_key in (self.object_key, self.legacy_key):
            try:
                response = await self.store._raw("get_object", Key=object_key)
            except ClientError as exc:
                if error_code(exc) in _NOT_FOUND_CODES:
                    continue
                raise s3_error(exc) from exc
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
            while piece := await self.store._run(_read_and_hash, body, writer, check):
                yield piece
        finally:
            body.close()
        check_staged(self.receipt, check.size, check.xxh3())


class _Multipart:
    """A multipart upload at a final generation key; started on the first part, never completed unverified."""

    def __init__(self, store: S3BlobStore, object_key: str) -> None:
        self.store = store
        self.object_key = object_key
        self.upload_id: str | None = None
        self.parts: list[dict[str, Any]] = []
        self.completed = False

    @property
    def started(self) -> bool:
        return self.upload_id is not None

    async def start(self) -> str:
        if self.upload_id is None:
            response = await self.store._call(
                "create_multipart_upload", Key=self.object_key, ContentType="application/octet-stream"
            )
            self.upload_id = str(response["UploadId"])
        return self.upload_id

    async def send(self, data: bytes) -> None:
        """Upload one part."""
        upload_id = await self.start()
        number = len(self.parts) + 1
        response = await self.store._call(
            "upload_part", Key=self.object_key, UploadId=upload_id, PartNumber=number, Body=data
        )
        self.parts.append({"PartNumber": number, "ETag": response["ETag"]})

    async def copy(self, staged: _StagedChunk) -> bool:
        """Copy a staged chunk server-side as the next part; False when the endpoint has no UploadPartCopy."""
        upload_id = await self.start()
        number = len(self.parts) + 1
        extra = {"CopySourceIfMatch": staged.etag} if staged.etag else {}
        # The ETag condition makes S3 copy exactly the bytes that were just hashed.
        try:
            response = await self.store._raw(
                "upload_part_copy",
                Key=self.object_key,
                UploadId=upload_id,
                PartNumber=number,
                CopySource={"Bucket": self.store.bucket, "Key": staged.object_key},
                **extra,
            )
        except ClientError as exc:
            if error_code(exc) not in _UNSUPPORTED_CODES:
                raise s3_error(exc) from exc
            self.store._part_copy = False
            logger.warning(
                "S3 UploadPartCopy is not supported (%s): parts are uploaded with their bytes",
                error_code(exc),
            )
            return False
        self.parts.append({"PartNumber": number, "ETag": response["CopyPartResult"]["ETag"]})
        return True

    async def complete(self) -> None:
        store = self.store
        request = {
            "Key": self.object_key,
            "UploadId": self.upload_id,
            "MultipartUpload": {"Parts": self.parts},
        }
        if store._conditional:
            try:
                await store._raw("complete_multipart_upload", IfNoneMatch="*", **request)
                self.completed = True
                return
            except ClientError as exc:
                code = error_code(exc)
                if code in _EXISTS_CODES:
                    raise Conflict() from exc
                if code not in _UNSUPPORTED_CODES:
                    raise s3_error(exc) from exc
                store._conditional = False
        await store._call("complete_multipart_upload", **request)
        self.completed = True

    async def abort(self) -> None:
        """Take back an upload that was started and not completed; nothing to do otherwise."""
        if self.upload_id is not None and not self.completed:
            await self.store._abort_upload(self.object_key, self.upload_id)


class _PartSink:
    """The bytes of one new generation, sent to its final key as they come.

    They go out in one ``PutObject`` when they fit in a part, else in a multipart upload that starts when the
    first part is full; either is only sent or completed once the bytes are verified.
    """

    def __init__(self, store: S3BlobStore, key: str) -> None:
        self.store = store
        self.key = key
        self.upload = _Multipart(store, store._object_key(key))
        self.pending = bytearray()
        self.sends_parts = True

    async def write(self, data: bytearray, writer: HashingWriter) -> None:
        await self.store._run(writer.update, data)
        await self._send_full_parts(data)

    async def _send_full_parts(self, data: bytes | bytearray) -> None:
        self.pending += data
        part_size = self.store.part_size
        while self.sends_parts and len(self.pending) >= part_size:
            await self.upload.send(bytes(self.pending[:part_size]))
            del self.pending[:part_size]

    async def publish(self, digest: StreamDigest) -> str:
        if not self.upload.started:
            await self.store._publish_small(self.key, bytes(self.pending))
            return self.key
        if self.pending:
            await self.upload.send(bytes(self.pending))
        await self.upload.complete()
        return self.key

    async def discard(self) -> None:
        await self.upload.abort()


class _CommitSink(_PartSink):
    """Joins the staged chunks of one area; a chunk that can be a part on its own is copied server-side.

    A commit bigger than a part starts its multipart upload with the first chunk and leaves a marker naming it
    in the staging area, so that an abort from any replica can find it.
    """

    def __init__(
        self, store: S3BlobStore, key: str, prefix: str, chunks: Sequence[ChunkReceipt], size: int
    ) -> None:
        super().__init__(store, key)
        self.prefix = prefix
        self.marker = prefix + MULTIPART_MARKER
        self.last_index = len(chunks) - 1
        self.sends_parts = size > store.part_size
        self.marked = False

    async def _start(self) -> None:
        await self.upload.start()
        record = json.dumps({"key": self.upload.object_key, "upload_id": self.upload.upload_id}).encode()
        self.marked = True
        await self.store._call("put_object", Key=self.marker, Body=record)

    async def append_staged(self, receipt: ChunkReceipt, writer: HashingWriter) -> None:
        if self.sends_parts and not self.upload.started:
            await self._start()
        staged = _StagedChunk(self.store, self.prefix, receipt, writer)
        own_part = receipt.size > 0 and (receipt.size >= MIN_PART_SIZE or receipt.index == self.last_index)
        if self.sends_parts and not self.pending and own_part and self.store._part_copy:
            # Big enough to be a part on its own: read it only to hash it, and let S3 copy the bytes.
            async for _ in staged.pieces():
                pass
            if await self.upload.copy(staged):
                return
            # No UploadPartCopy on this endpoint: send the (already hashed) bytes instead.
            async for piece in staged.pieces(hash_into_commit=False):
                await self._send_full_parts(piece)
            return
        # Small chunks are joined into parts of at least the S3 minimum.
        async for piece in staged.pieces():
            await self._send_full_parts(piece)

    async def discard(self) -> None:
        await super().discard()
        if self.marked:
            await self.store._call("delete_object", Key=self.marker)


class _SpoolSink:
    """One upload chunk, spooled so that memory stays bounded whatever its size, and sent once verified."""

    def __init__(self, store: S3BlobStore, prefix: str) -> None:
        self.store = store
        self.prefix = prefix
        self.spool = tempfile.SpooledTemporaryFile(max_size=store.part_size)  # noqa: SIM115 - closed by discard

    async def write(self, data: bytearray, hasher: ChunkHasher) -> None:
        await self.store._run(_hash_and_spool, hasher, self.spool, data)

    async def keep(self, receipt: ChunkReceipt) -> ChunkReceipt:
        object_key = _chunk_key(self.prefix, receipt.index, receipt.sha256)
        # Another copy of this index with other bytes: refused here, and never replaced, since every content
        # has its own key. Two different copies racing both land; the metadata database keeps the first one
        # recorded and the commit reads exactly that one.
        async for item in self.store._list(f"{self.prefix}{receipt.index}."):
            if item["Key"] != object_key:
                raise ChunkConflict(index=receipt.index)
        metadata = {"sha256": receipt.sha256, "xxh3": receipt.xxh3}
        await self.store._call(
            "put_object",
            Key=object_key,
            Body=_rewound(self.spool),
            ContentLength=receipt.size,
            Metadata=metadata,
        )
        return receipt

    async def discard(self) -> None:
        self.spool.close()


@functools.cache
def _shared_loader() -> botocore.loaders.Loader:
    return botocore.loaders.create_loader()


def _new_client(endpoint_url: str | None, region: str | None, io_threads: int) -> S3Client:
    core = botocore.session.get_session()
    # Service models are large JSON files: parse them once per process, not once per store. Credentials and
    # configuration are still resolved per session.
    core.register_component("data_loader", _shared_loader())
    client: S3Client = boto3.session.Session(botocore_session=core).client(
        "s3",
        endpoint_url=endpoint_url,
        region_name=region,
        config=Config(
            max_pool_connections=max(io_threads, 10),
            retries={"mode": "standard", "max_attempts": 3},
            # Many S3-compatible endpoints accept neither virtual hosts nor trailing checksums.
            s3={"addressing_style": "path" if endpoint_url else "auto"},
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
            # Presigned URLs too: botocore would sign them with the deprecated SigV2 otherwise.
            signature_version="s3v4",
        ),
    )
    return client


def _chunk_key(prefix: str, index: int, sha256: str) -> str:
    """The staging key of one content of chunk ``index``: each distinct content has its own."""
    return f"{prefix}{index}.{sha256}"


def _normalize_prefix(prefix: str) -> str:
    cleaned = prefix.strip("/")
    if not cleaned:
        return ""
    for segment in cleaned.split("/"):
        if segment in ("", ".", "..") or "\x00" in segment or "\\" in segment:
            raise InvalidRequest("malformed S3 key prefix")
    return cleaned


def _rewound(body: bytes | IO[bytes]) -> bytes | IO[bytes]:
    if not isinstance(body, bytes):
        body.seek(0)
    return body


def _read_exact(body: Any, length: int) -> bytes:
    parts: list[bytes] = []
    remaining = length
    while remaining > 0:
        part = body.read(remaining)
        if not part:
            break
        parts.append(part)
        remaining -= len(part)
    return b"".join(parts)


def _read_all_and_close(body: Any) -> bytes:
    try:
        data: bytes = body.read()
        return data
    finally:
        body.close()


def _read_and_hash(body: Any, writer: HashingWriter | None, check: StagedCheck) -> bytes:
    piece: bytes = body.read(_READ_PIECE)
    if piece:
        if writer is not None:
            writer.update(piece)
        check.update(piece)
    return piece


def _hash_and_spool(hasher: ChunkHasher, spool: IO[bytes], data: bytearray) -> None:
    hasher.update(data)
    spool.write(data)

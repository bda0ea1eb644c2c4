"""Multipart assembly on S3: new generations written part by part at their final key.

A :class:`Multipart` is started on its first part and only completed once the bytes are verified; one that
is not wanted is aborted, or, where the endpoint lacks ``AbortMultipartUpload``, completed with a single empty
part and deleted, so no part is left behind. A multipart upload that must outlive the request that started it
(a commit's, a direct upload's) is named by a *marker* object in its staging area, so that an abort from any
replica can find it.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from blobstore.digests import HashingWriter, StreamDigest
from blobstore.errors import Conflict, Corruption
from blobstore.storage.keys import BLOB_DIR
from blobstore.storage.s3_client import (
    EXISTS_CODES,
    NO_ABORT_CODES,
    NOT_FOUND_CODES,
    UNSUPPORTED_CODES,
    BucketClient,
    error_code,
    logger,
    s3_error,
)

MIN_PART_SIZE = 5 * 1024 * 1024
"""S3's minimum size for every part of a multipart upload but the last."""
DEFAULT_PART_SIZE = 8 * 1024 * 1024
MULTIPART_MARKER = "multipart"
"""The marker's name in a staging area."""


class Multipart:
    """A multipart upload at a final generation key; started on the first part, never completed unverified."""

    def __init__(self, s3: BucketClient, object_key: str) -> None:
        self.s3 = s3
        self.object_key = object_key
        self.upload_id: str | None = None
        self.parts: list[dict[str, Any]] = []
        self.completed = False

    @property
    def started(self) -> bool:
        return self.upload_id is not None

    async def start(self) -> str:
        if self.upload_id is None:
            response = await self.s3.call(
                "create_multipart_upload", Key=self.object_key, ContentType="application/octet-stream"
            )
            self.upload_id = str(response["UploadId"])
        return self.upload_id

    async def mark(self, marker_key: str) -> None:
        """Write the marker naming this (started) upload at ``marker_key``."""
        record = json.dumps({"key": self.object_key, "upload_id": self.upload_id}).encode()
        await self.s3.call("put_object", Key=marker_key, Body=record)

    async def send(self, data: bytes) -> None:
        """Upload one part."""
        upload_id = await self.start()
        number = len(self.parts) + 1
        response = await self.s3.call(
            "upload_part", Key=self.object_key, UploadId=upload_id, PartNumber=number, Body=data
        )
        self.parts.append({"PartNumber": number, "ETag": response["ETag"]})

    async def copy(self, source_key: str, etag: str | None) -> bool:
        """Copy an object server-side as the next part; False when the endpoint has no UploadPartCopy.

        With ``etag``, S3 copies exactly the bytes that carried it (the ones the caller just hashed).
        """
        upload_id = await self.start()
        number = len(self.parts) + 1
        extra = {"CopySourceIfMatch": etag} if etag else {}
        try:
            response = await self.s3.raw(
                "upload_part_copy",
                Key=self.object_key,
                UploadId=upload_id,
                PartNumber=number,
                CopySource={"Bucket": self.s3.bucket, "Key": source_key},
                **extra,
            )
        except ClientError as exc:
            if error_code(exc) not in UNSUPPORTED_CODES:
                raise s3_error(exc) from exc
            self.s3.upload_part_copy = False
            logger.warning(
                "S3 UploadPartCopy is not supported (%s): parts are uploaded with their bytes",
                error_code(exc),
            )
            return False
        self.parts.append({"PartNumber": number, "ETag": response["CopyPartResult"]["ETag"]})
        return True

    async def complete(self) -> None:
        s3 = self.s3
        request = {
            "Key": self.object_key,
            "UploadId": self.upload_id,
            "MultipartUpload": {"Parts": self.parts},
        }
        if s3.conditional_writes:
            try:
                await s3.raw("complete_multipart_upload", IfNoneMatch="*", **request)
                self.completed = True
                return
            except ClientError as exc:
                code = error_code(exc)
                if code in EXISTS_CODES:
                    raise Conflict() from exc
                if code not in UNSUPPORTED_CODES:
                    raise s3_error(exc) from exc
                s3.conditional_writes = False
        await s3.call("complete_multipart_upload", **request)
        self.completed = True

    async def abort(self) -> None:
        """Take back an upload that was started and not completed; nothing to do otherwise."""
        if self.upload_id is not None and not self.completed:
            await abort_upload(self.s3, self.object_key, self.upload_id)


class PartSink:
    """The bytes of one new generation, sent to its final key as they come.

    They go out in one ``PutObject`` when they fit in a part, else in a multipart upload that starts when the
    first part is full; either is only sent or completed once the bytes are verified.
    """

    def __init__(self, s3: BucketClient, key: str, part_size: int) -> None:
        self.s3 = s3
        self.key = key
        self.part_size = part_size
        self.upload = Multipart(s3, s3.object_key(key))
        self.pending = bytearray()
        self.sends_parts = True

    async def write(self, data: bytearray, writer: HashingWriter) -> None:
        await self.s3.run(writer.update, data)
        await self.send_full_parts(data)

    async def send_full_parts(self, data: bytes | bytearray) -> None:
        self.pending += data
        while self.sends_parts and len(self.pending) >= self.part_size:
            await self.upload.send(bytes(self.pending[: self.part_size]))
            del self.pending[: self.part_size]

    async def publish(self, digest: StreamDigest) -> str:
        if not self.upload.started:
            await self._put_small(bytes(self.pending))
            return self.key
        if self.pending:
            await self.upload.send(bytes(self.pending))
        await self.upload.complete()
        return self.key

    async def _put_small(self, body: bytes) -> None:
        object_key = self.s3.object_key(self.key)
        if not await self.s3.put_new(object_key, body, ContentType="application/octet-stream"):
            # Random 128-bit suffixes never collide in practice; a clash means something else writes here.
            raise Conflict()

    async def discard(self) -> None:
        await self.upload.abort()


async def read_marker(s3: BucketClient, marker_key: str) -> dict[str, str] | None:
    """The object key and S3 upload id a marker names; None when there is no marker."""
    raw = await s3.get_all(marker_key)
    if raw is None:
        return None
    record = json.loads(raw)
    if not isinstance(record, dict) or not record.get("key", "").startswith(s3.object_key(BLOB_DIR)):
        raise Corruption()
    return {"key": str(record["key"]), "upload_id": str(record["upload_id"])}


async def abort_upload(
    s3: BucketClient, object_key: str, upload_id: str, *, may_be_complete: bool = False
) -> None:
    """Abort (or, lacking AbortMultipartUpload, discard) a multipart upload; a missing one is fine.

    ``may_be_complete``: the upload may have been completed already (a commit's marker outlived it), and
    its object is then a published blob that discarding must not touch.
    """
    if s3.abort_multipart_upload:
        try:
            await s3.raw("abort_multipart_upload", Key=object_key, UploadId=upload_id)
            return
        except ClientError as exc:
            code = error_code(exc)
            if code in NOT_FOUND_CODES:
                return
            if code not in NO_ABORT_CODES:
                raise s3_error(exc) from exc
            s3.abort_multipart_upload = False
            logger.warning(
                "S3 AbortMultipartUpload is not supported (%s): unwanted uploads are completed, then deleted",
                code,
            )
    if may_be_complete and await s3.head(object_key) is not None:
        return
    await _discard_upload(s3, object_key, upload_id)


async def _discard_upload(s3: BucketClient, object_key: str, upload_id: str) -> None:
    """Free a multipart upload without ``AbortMultipartUpload``.

    Part 1 is replaced by an empty part and the upload completed with it alone (S3 drops every part a
    completion does not list), then the resulting empty object is deleted. ``object_key`` is the upload's
    own random generation key, never a published blob's.
    """
    try:
        part = await s3.raw("upload_part", Key=object_key, UploadId=upload_id, PartNumber=1, Body=b"")
        await s3.raw(
            "complete_multipart_upload",
            Key=object_key,
            UploadId=upload_id,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
        )
    except ClientError as exc:
        if error_code(exc) in NOT_FOUND_CODES:
            return
        raise s3_error(exc) from exc
    await s3.call("delete_object", Key=object_key)


async def abort_stale_uploads(s3: BucketClient, older_than: datetime) -> int:
    """Abort multipart uploads under the prefix started before ``older_than``; returns how many."""
    aborted = 0
    markers: dict[str, str] = {}
    while True:
        try:
            page = await s3.raw("list_multipart_uploads", Prefix=s3.object_key(""), **markers)
        except ClientError as exc:
            if error_code(exc) not in UNSUPPORTED_CODES:
                raise s3_error(exc) from exc
            # Such endpoints cannot list what an interrupted process left; every upload this store
            # starts is completed or discarded by the process that started it.
            logger.info(
                "S3 ListMultipartUploads is not supported (%s): no stale uploads to sweep", error_code(exc)
            )
            return aborted
        for upload in page.get("Uploads", []):
            if await _last_activity(s3, upload) < older_than:
                await abort_upload(s3, upload["Key"], upload["UploadId"])
                aborted += 1
        if not page.get("IsTruncated"):
            return aborted
        markers = {"KeyMarker": page["NextKeyMarker"], "UploadIdMarker": page["NextUploadIdMarker"]}


async def _last_activity(s3: BucketClient, upload: dict[str, Any]) -> datetime:
    """When a multipart upload was last written to: its start or its newest part.

    Some endpoints (moto) report a fixed ``Initiated`` time, and a long commit keeps adding parts long
    after it started, so the newest part's time is what tells an abandoned upload from a busy one.
    """
    newest: datetime = upload["Initiated"]
    try:
        parts = await s3.raw("list_parts", Key=upload["Key"], UploadId=upload["UploadId"], MaxParts=1000)
    except ClientError as exc:
        if error_code(exc) in NOT_FOUND_CODES | NO_ABORT_CODES:
            return newest
        raise s3_error(exc) from exc
    for part in parts.get("Parts", []):
        newest = max(newest, part["LastModified"])
    return newest

"""Direct uploads to S3: the client ``PUT``\\ s the parts of a multipart upload through presigned URLs.

The multipart upload is started at a generation key of the declared digest, and the upload's staging area
(``staging/<upload_id>/``) holds only the ``multipart`` marker that an interrupted commit leaves too, naming
the object key and the S3 upload id. So ``stage_abort`` — on abort, on expiry, after completion, for
leftovers — aborts the multipart upload exactly as it does a commit's.

Parts are S3 parts: 1-based, all of the upload's part size but the last, at least 5 MiB except the last, at
most 10,000. The commit lists the parts (the client keeps no ETags), checks their lengths, completes the
multipart upload and reads the object back to compute its SHA-256 and the XXH3-128 of every integrity block:
only an object whose size and digest match the declared ones becomes a blob. A mismatch deletes the object
and starts a fresh multipart upload, so the upload stays ``open`` for a new attempt or an abort.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import anyio
from botocore.exceptions import ClientError

from blobstore.digests import HashingWriter, StreamDigest, normalize_sha256
from blobstore.errors import (
    ChunkIndexOutOfRange,
    ChunkSizeInvalid,
    DigestMismatch,
    InvalidRequest,
    LimitExceeded,
    NotFound,
    SizeMismatch,
    StorageUnavailable,
    UploadIncomplete,
)
from blobstore.models import BlobInfo
from blobstore.storage.base import DIRECT_MAX_PARTS as MAX_PARTS
from blobstore.storage.base import DirectPart, ProgressCallback
from blobstore.storage.keys import generation_key, validate_key, validate_staging_ref
from blobstore.storage.s3_client import (
    NO_ABORT_CODES,
    NOT_FOUND_CODES,
    BucketClient,
    error_code,
    read_and_hash,
    s3_error,
)
from blobstore.storage.s3_multipart import MIN_PART_SIZE, MULTIPART_MARKER, Multipart, read_marker
from blobstore.storage.s3_staging import staging_prefix

MAX_PART_SIZE = 5 * 1024 * 1024 * 1024
_MISSING_SHOWN = 100


def part_count(size: int, part_size: int) -> int:
    """How many parts an upload of ``size`` bytes has; refuses a layout S3 would not accept."""
    if size <= 0:
        raise InvalidRequest("a direct upload needs a declared size of at least one byte")
    count = -(-size // part_size)
    if count > 1 and not MIN_PART_SIZE <= part_size <= MAX_PART_SIZE:
        raise InvalidRequest("the parts of a direct upload must be between 5 MiB and 5 GiB")
    if count > MAX_PARTS:
        raise LimitExceeded(f"a direct upload has at most {MAX_PARTS} parts")
    return count


def part_length(number: int, size: int, part_size: int) -> int:
    return min(part_size, size - (number - 1) * part_size)


class DirectUploads:
    """The direct-upload operations of one S3 bucket and prefix, for blobs of ``block_size`` blocks."""

    def __init__(self, s3: BucketClient, block_size: int) -> None:
        self.s3 = s3
        self.block_size = block_size

    def _marker_key(self, staging_ref: str) -> str:
        return staging_prefix(self.s3, staging_ref) + MULTIPART_MARKER

    async def _marker(self, staging_ref: str) -> dict[str, str]:
        marker = await read_marker(self.s3, self._marker_key(staging_ref))
        if marker is None:
            raise NotFound("the upload's multipart upload is gone")
        return marker

    async def begin(self, upload_id: str, *, sha256: str) -> str:
        staging_ref = validate_staging_ref(upload_id)
        await self._start(staging_ref, generation_key(normalize_sha256(sha256)))
        return staging_ref

    async def _start(self, staging_ref: str, key: str) -> None:
        upload = Multipart(self.s3, self.s3.object_key(key))
        await upload.start()
        try:
            await upload.mark(self._marker_key(staging_ref))
        except BaseException:
            with anyio.CancelScope(shield=True):
                await upload.abort()
            raise

    async def restart(self, staging_ref: str, *, sha256: str) -> None:
        """A fresh multipart upload in place of one that was completed (its object is gone or orphaned).

        Never an abort: the old upload is complete, and on endpoints without AbortMultipartUpload discarding
        it would write to a finished upload.
        """
        await self._start(validate_staging_ref(staging_ref), generation_key(normalize_sha256(sha256)))

    def _key_of(self, object_key: str) -> str:
        return validate_key(object_key[len(self.s3.object_key("")) :])

    async def parts(
        self, staging_ref: str, numbers: Sequence[int], *, part_size: int, size: int, expires_in: int
    ) -> list[DirectPart]:
        count = part_count(size, part_size)
        for number in numbers:
            if not 1 <= number <= count:
                raise ChunkIndexOutOfRange(index=number, chunks=count)
        marker = await self._marker(staging_ref)
        urls = []
        for number in numbers:
            params = {
                "Bucket": self.s3.bucket,
                "Key": marker["key"],
                "UploadId": marker["upload_id"],
                "PartNumber": number,
            }
            urls.append(
                await self.s3.run(
                    self.s3.client.generate_presigned_url,
                    "upload_part",
                    Params=params,
                    ExpiresIn=expires_in,
                )
            )
        return [
            DirectPart(number, part_length(number, size, part_size), url)
            for number, url in zip(numbers, urls, strict=True)
        ]

    async def commit(
        self,
        staging_ref: str,
        *,
        part_size: int,
        expected_size: int,
        expected_sha256: str,
        progress: ProgressCallback | None = None,
        part_etags: Mapping[int, str] | None = None,
    ) -> BlobInfo:
        count = part_count(expected_size, part_size)
        marker = await read_marker(self.s3, self._marker_key(staging_ref))
        if marker is None:
            # A completer verified the object, then stopped before its commit: the object is an orphan now.
            await self.restart(staging_ref, sha256=expected_sha256)
            raise UploadIncomplete(
                missing=list(range(1, min(count, _MISSING_SHOWN) + 1)), missing_count=count
            )
        object_key = marker["key"]
        try:
            listed = await self._list_parts(object_key, marker["upload_id"])
            if listed is not None:
                _check_parts(listed, count, expected_size, part_size)
            unlisted = False
        except _CannotList:
            # Without ListParts the client's ETags name the parts; their lengths are checked by the read-back.
            listed = _parts_from_etags(part_etags, count)
            unlisted = True
        if listed is not None:
            upload = Multipart(self.s3, object_key)
            upload.upload_id = marker["upload_id"]
            # Parts past the last are not listed, and S3 drops them with the completion.
            upload.parts = [{"PartNumber": n, "ETag": listed[n]["ETag"]} for n in range(1, count + 1)]
            try:
                await upload.complete()
            except NotFound:
                listed = None
            except StorageUnavailable:
                # Such endpoints (s3rver) fail the completion of a finished upload without saying why.
                if not unlisted or await self.s3.head(object_key) is None:
                    raise
                listed = None
        if listed is None:
            # Completed by an earlier completer that has not committed (it died, or lost its lease). If it is
            # still alive, a failure of its commit deletes that object: work on a copy of one's own.
            copied = await self._own_copy(object_key, expected_sha256)
            if copied is None:
                await self.restart(staging_ref, sha256=expected_sha256)
                raise UploadIncomplete(
                    missing=list(range(1, min(count, _MISSING_SHOWN) + 1)), missing_count=count
                )
            object_key = copied
        try:
            digest = await self._verify(object_key, expected_size, expected_sha256, progress)
        except (DigestMismatch, SizeMismatch):
            with anyio.CancelScope(shield=True):
                await self.s3.call("delete_object", Key=object_key)
                await self.restart(staging_ref, sha256=expected_sha256)
            raise
        # The multipart upload is complete: nothing is left for an abort to free (a later failure restarts).
        await self.s3.call("delete_object", Key=self._marker_key(staging_ref))
        return BlobInfo(
            self._key_of(object_key), digest.size, digest.sha256, digest.block_size, digest.block_xxh3
        )

    async def _own_copy(self, object_key: str, sha256: str) -> str | None:
        """A server-side copy of a completed object under a fresh generation key; None when it is gone."""
        copy_key = self.s3.object_key(generation_key(normalize_sha256(sha256)))
        try:
            await self.s3.call(
                "copy_object",
                Key=copy_key,
                CopySource={"Bucket": self.s3.bucket, "Key": object_key},
                ContentType="application/octet-stream",
                MetadataDirective="REPLACE",
            )
        except NotFound:
            return None
        return copy_key

    async def _list_parts(self, object_key: str, upload_id: str) -> dict[int, dict[str, Any]] | None:
        """The uploaded parts by number; None when the multipart upload no longer exists (completed).

        Raises :class:`_CannotList` where the endpoint has no ListParts (s3rver).
        """
        parts: dict[int, dict[str, Any]] = {}
        extra: dict[str, Any] = {}
        while True:
            try:
                page = await self.s3.raw(
                    "list_parts", Key=object_key, UploadId=upload_id, MaxParts=1000, **extra
                )
            except ClientError as exc:
                if error_code(exc) in NOT_FOUND_CODES:
                    return None
                if error_code(exc) in NO_ABORT_CODES:
                    raise _CannotList() from exc
                raise s3_error(exc) from exc
            for part in page.get("Parts", []):
                parts[int(part["PartNumber"])] = part
            marker = page.get("NextPartNumberMarker")
            if not page.get("IsTruncated") or not marker:
                return parts
            extra = {"PartNumberMarker": marker}

    async def _verify(
        self, object_key: str, size: int, sha256: str, progress: ProgressCallback | None
    ) -> StreamDigest:
        """Read the completed object back: its size, SHA-256 and per-block XXH3-128, checked before use."""
        writer = HashingWriter(block_size=self.block_size, expected_size=size)
        response = await self.s3.call("get_object", Key=object_key)
        body = response["Body"]
        try:
            while await self.s3.run(read_and_hash, body, writer):
                if writer.size > size:
                    raise SizeMismatch(expected_size=size, size=writer.size)
                if progress is not None:
                    await progress(writer.size)
        finally:
            body.close()
        return writer.finish(expected_sha256=sha256)


class _CannotList(Exception):
    """The endpoint does not implement ListParts."""


def _check_parts(listed: dict[int, dict[str, Any]], count: int, size: int, part_size: int) -> None:
    missing = [number for number in range(1, count + 1) if number not in listed]
    if missing:
        raise UploadIncomplete(missing=missing[:_MISSING_SHOWN], missing_count=len(missing))
    for number in range(1, count + 1):
        expected = part_length(number, size, part_size)
        if int(listed[number]["Size"]) != expected:
            raise ChunkSizeInvalid(
                f"part {number} has {listed[number]['Size']} bytes, not {expected}",
                part_number=number,
                expected_length=expected,
            )


def _parts_from_etags(part_etags: Mapping[int, str] | None, count: int) -> dict[int, dict[str, Any]]:
    if not part_etags:
        raise InvalidRequest("this storage cannot list the parts: complete with the ETag of every part")
    missing = [number for number in range(1, count + 1) if number not in part_etags]
    if missing:
        raise UploadIncomplete(missing=missing[:_MISSING_SHOWN], missing_count=len(missing))
    return {number: {"ETag": part_etags[number]} for number in range(1, count + 1)}

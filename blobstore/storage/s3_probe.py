"""What an S3 endpoint supports, found out at start, and whether its bucket is there and writable.

Correctness relies on no optional S3 feature, but the store uses three where the endpoint has them:
conditional writes (``If-None-Match: *``), ``UploadPartCopy`` and ``AbortMultipartUpload``. :func:`probe`
tries each once under ``<prefix>/probe/`` and leaves nothing behind; what it finds is kept in the
:class:`~blobstore.storage.s3_client.BucketClient`, which every S3 module consults.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import anyio
from botocore.exceptions import ClientError

from blobstore.errors import BlobstoreError, StorageUnavailable
from blobstore.storage.s3_client import (
    EXISTS_CODES,
    UNSUPPORTED_CODES,
    BucketClient,
    error_code,
    logger,
    s3_error,
)
from blobstore.storage.s3_multipart import Multipart

PROBE_DIR = "probe"


@dataclass(frozen=True, slots=True)
class S3Capabilities:
    """What :func:`probe` found the endpoint to support."""

    conditional_writes: bool
    """``If-None-Match: *`` refuses to replace an existing object."""
    upload_part_copy: bool
    abort_multipart_upload: bool
    location: str = ""
    """The bucket, prefix and endpoint probed (no credentials)."""

    def __str__(self) -> str:
        """The start-up line: ``S3 bucket s3://media/blobs at http://minio:9000: conditional writes yes,
        UploadPartCopy yes, AbortMultipartUpload yes``."""
        flags = (self.conditional_writes, self.upload_part_copy, self.abort_multipart_upload)
        writes, copy, abort = ("yes" if flag else "no" for flag in flags)
        return (
            f"S3 bucket {self.location}: conditional writes {writes}, UploadPartCopy {copy}, "
            f"AbortMultipartUpload {abort}"
        )


async def head_bucket(s3: BucketClient, what: str) -> None:
    """``StorageUnavailable`` naming the bucket, the endpoint and ``what`` unless the bucket answers."""
    try:
        await s3.raw("head_bucket")
    except ClientError as exc:
        code = error_code(exc)
        # HEAD answers have no body: a missing bucket is a bare 404.
        code = "NoSuchBucket" if code in ("404", "NoSuchBucket") else code
        logger.warning("S3 HeadBucket on %s failed: %s", s3.location, code)
        raise StorageUnavailable(
            f"S3 bucket {s3.location} {what} (HeadBucket: {code})",
            operation="HeadBucket",
            backend_code=code,
        ) from exc
    except StorageUnavailable as exc:
        raise unavailable(s3, exc, what) from exc


def unavailable(s3: BucketClient, exc: BlobstoreError, what: str) -> StorageUnavailable:
    operation = getattr(exc, "operation", None)
    code = getattr(exc, "backend_code", None) or exc.code
    reason = f" ({operation}: {code})" if operation else f" ({code})"
    return StorageUnavailable(
        f"S3 bucket {s3.location} {what}{reason}", operation=operation, backend_code=code
    )


async def probe(s3: BucketClient) -> S3Capabilities:
    """Check that the bucket exists and is writable, and find out what the endpoint supports.

    Writes, rewrites and deletes a small object under ``<prefix>/probe/``, and runs a one-part multipart
    upload there that it either aborts or, where aborting is missing, completes and deletes, so nothing
    stays behind. Raises ``StorageUnavailable`` naming the bucket and endpoint when it is not usable.
    """
    source = s3.object_key(f"{PROBE_DIR}/{secrets.token_hex(8)}")
    target = source + ".multipart"
    await head_bucket(s3, "does not exist or is not reachable")
    try:
        await s3.call("put_object", Key=source, Body=b"probe")
    except BlobstoreError as exc:
        raise unavailable(s3, exc, "is not writable") from exc
    try:
        try:
            await s3.raw("put_object", Key=source, Body=b"again", IfNoneMatch="*")
            replaced = True
        except ClientError as exc:
            if error_code(exc) not in EXISTS_CODES | UNSUPPORTED_CODES:
                raise s3_error(exc) from exc
            replaced = error_code(exc) in UNSUPPORTED_CODES
        upload = Multipart(s3, target)
        try:
            await upload.start()
            try:
                await s3.raw(
                    "upload_part_copy",
                    Key=target,
                    UploadId=upload.upload_id,
                    PartNumber=1,
                    CopySource={"Bucket": s3.bucket, "Key": source},
                )
                s3.upload_part_copy = True
            except ClientError as exc:
                if error_code(exc) not in UNSUPPORTED_CODES:
                    raise s3_error(exc) from exc
                s3.upload_part_copy = False
            await upload.abort()
        finally:
            await s3.call("delete_object", Key=target)
    except BlobstoreError as exc:
        raise unavailable(s3, exc, "failed the capability probe") from exc
    finally:
        with anyio.CancelScope(shield=True):
            await s3.call("delete_object", Key=source)
    s3.conditional_writes = s3.conditional_writes and not replaced
    capabilities = S3Capabilities(
        s3.conditional_writes, s3.upload_part_copy, s3.abort_multipart_upload, location=s3.location
    )
    logger.info("%s", capabilities)
    return capabilities

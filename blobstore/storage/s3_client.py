"""The S3 client of one bucket and prefix, and the mapping of its errors onto the catalogue.

Every S3 module of the store talks to the endpoint through one :class:`BucketClient`: boto3 calls run in
worker threads under a limit, and come back with their errors translated (:func:`s3_error`). The client also
keeps what the endpoint has been found to lack (conditional writes, ``UploadPartCopy``,
``AbortMultipartUpload``), so that every module falls back the same way once one of them has seen it.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator
from typing import IO, TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import boto3
import botocore.loaders
import botocore.session
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from urllib3.exceptions import HTTPError as Urllib3Error

from blobstore.digests import HashingWriter, StagedCheck
from blobstore.errors import BlobstoreError, Conflict, InvalidRequest, NotFound, StorageUnavailable, TooLarge
from blobstore.storage.io_errors import mapped_os_errors

if TYPE_CHECKING:
    from mypy_boto3_s3.client import S3Client

logger = logging.getLogger("blobstore.storage.s3")

NOT_FOUND_CODES = frozenset({"NoSuchKey", "NotFound", "NoSuchUpload", "404"})
EXISTS_CODES = frozenset({"PreconditionFailed", "ConditionalRequestConflict", "412", "409"})
UNSUPPORTED_CODES = frozenset({"NotImplemented", "501"})
NO_ABORT_CODES = frozenset({"NotImplemented", "501", "MethodNotAllowed", "405"})
_TRANSPORT_ERRORS = (BotoCoreError, Urllib3Error, OSError)
_READ_PIECE = 1024 * 1024


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
        if code in NOT_FOUND_CODES:
            return NotFound()
        if code == "EntityTooLarge":
            return TooLarge()
        if code in EXISTS_CODES:
            return Conflict()
        operation = exc.operation_name or operation
    else:
        code = type(exc).__name__
    logger.warning("S3 %s failed: %s", operation or "request", code)
    return StorageUnavailable(operation=operation, backend_code=code)


_WORKER_OPERATIONS = {
    "read_exact": "GetObject",
    "read_and_hash": "GetObject",
    "read_all_and_close": "GetObject",
}


def _operation_name(method: str) -> str:
    """``upload_part_copy`` -> ``UploadPartCopy``, as S3 names its operations."""
    if method in _WORKER_OPERATIONS:
        return _WORKER_OPERATIONS[method]
    return "".join(word.capitalize() for word in method.strip("_").split("_"))


class BucketClient:
    """A boto3 client bound to one bucket and key prefix; blocking calls run in worker threads."""

    def __init__(
        self,
        bucket: str,
        prefix: str,
        *,
        client: S3Client,
        io_threads: int,
        conditional_writes: bool = True,
    ) -> None:
        self.bucket = bucket
        self.prefix = normalize_prefix(prefix)
        self.client = client
        self.conditional_writes = conditional_writes
        """False once the endpoint has answered ``If-None-Match`` with NotImplemented."""
        self.upload_part_copy = True
        self.abort_multipart_upload = True
        self._limiter = anyio.CapacityLimiter(io_threads)

    def object_key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    @property
    def location(self) -> str:
        """Bucket, prefix and endpoint, for messages (no credentials)."""
        where = f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"
        return f"{where} at {self.client.meta.endpoint_url}"

    async def run(self, func: Any, *args: Any, **kwargs: Any) -> Any:
        """Run a blocking call in a worker thread; S3 and transport errors come back translated."""
        try:
            # OSError: the local spool of a staged chunk.
            with mapped_os_errors():
                return await anyio.to_thread.run_sync(
                    functools.partial(func, *args, **kwargs), limiter=self._limiter
                )
        except (ClientError, BotoCoreError, Urllib3Error) as exc:
            raise s3_error(exc, _operation_name(getattr(func, "__name__", "request"))) from exc

    async def raw(self, operation: str, **kwargs: Any) -> Any:
        """One S3 call, with ``ClientError`` left untranslated for callers that branch on its code."""
        try:
            return await anyio.to_thread.run_sync(
                functools.partial(getattr(self.client, operation), Bucket=self.bucket, **kwargs),
                limiter=self._limiter,
            )
        except _TRANSPORT_ERRORS as exc:
            raise s3_error(exc, _operation_name(operation)) from exc

    async def call(self, operation: str, **kwargs: Any) -> Any:
        try:
            return await self.raw(operation, **kwargs)
        except ClientError as exc:
            raise s3_error(exc) from exc

    async def raw_or_none(self, operation: str, **kwargs: Any) -> Any:
        """:meth:`call`, with None for an object (or multipart upload) that does not exist."""
        try:
            return await self.raw(operation, **kwargs)
        except ClientError as exc:
            if error_code(exc) in NOT_FOUND_CODES:
                return None
            raise s3_error(exc) from exc

    async def head(self, object_key: str) -> dict[str, Any] | None:
        response: dict[str, Any] | None = await self.raw_or_none("head_object", Key=object_key)
        return response

    async def get_all(self, object_key: str) -> bytes | None:
        """A small object's whole body; None when it does not exist."""
        response = await self.raw_or_none("get_object", Key=object_key)
        if response is None:
            return None
        body: bytes = await self.run(read_all_and_close, response["Body"])
        return body

    async def put_new(self, object_key: str, body: bytes | IO[bytes], **extra: Any) -> bool:
        """``PutObject`` that never replaces an object: False when ``object_key`` already exists.

        Endpoints without conditional writes get a HEAD first; the race that leaves is closed by random keys
        for blobs, and for staged chunks only matters to two resends racing with different bytes.
        """
        if self.conditional_writes:
            try:
                await self.raw("put_object", Key=object_key, Body=rewound(body), IfNoneMatch="*", **extra)
                return True
            except ClientError as exc:
                code = error_code(exc)
                if code in EXISTS_CODES:
                    return False
                if code not in UNSUPPORTED_CODES:
                    raise s3_error(exc) from exc
                self.conditional_writes = False
        if await self.head(object_key) is not None:
            return False
        await self.call("put_object", Key=object_key, Body=rewound(body), **extra)
        return True

    async def list_objects(self, prefix: str) -> AsyncIterator[dict[str, Any]]:
        token: str | None = None
        while True:
            extra = {"ContinuationToken": token} if token else {}
            page = await self.call("list_objects_v2", Prefix=prefix, **extra)
            for item in page.get("Contents", []):
                yield item
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return


@functools.cache
def _shared_loader() -> botocore.loaders.Loader:
    return botocore.loaders.create_loader()


def new_client(endpoint_url: str | None, region: str | None, io_threads: int) -> S3Client:
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


def normalize_prefix(prefix: str) -> str:
    cleaned = prefix.strip("/")
    if not cleaned:
        return ""
    for segment in cleaned.split("/"):
        if segment in ("", ".", "..") or "\x00" in segment or "\\" in segment:
            raise InvalidRequest("malformed S3 key prefix")
    return cleaned


def rewound(body: bytes | IO[bytes]) -> bytes | IO[bytes]:
    if not isinstance(body, bytes):
        body.seek(0)
    return body


def read_exact(body: Any, length: int) -> bytes:
    parts: list[bytes] = []
    remaining = length
    while remaining > 0:
        part = body.read(remaining)
        if not part:
            break
        parts.append(part)
        remaining -= len(part)
    return b"".join(parts)


def read_all_and_close(body: Any) -> bytes:
    try:
        data: bytes = body.read()
        return data
    finally:
        body.close()


def read_and_hash(body: Any, writer: HashingWriter | None, check: StagedCheck | None = None) -> bytes:
    """The next piece of a ``GetObject`` body, hashed into ``writer`` and ``check`` where given."""
    piece: bytes = body.read(_READ_PIECE)
    if piece:
        if writer is not None:
            writer.update(piece)
        if check is not None:
            check.update(piece)
    return piece

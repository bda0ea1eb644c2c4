"""S3-only behaviour: multipart parts, server-side copies, upload cleanup, conditional writes, presigning."""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from blobstore.disposition import content_disposition
from blobstore.errors import (
    ChunkConflict,
    DigestMismatch,
    NotFound,
    StorageUnavailable,
    UploadIncomplete,
)
from blobstore.storage import SupportsPresign, open_blob_store
from blobstore.storage.s3 import MIN_PART_SIZE, S3BlobStore
from tests.fixtures.ports import free_port
from tests.fixtures.s3 import S3Location
from tests.storage.conftest import chunks_of, keys_of, read_all

pytestmark = pytest.mark.s3

MiB = 1024 * 1024


@pytest.fixture
async def s3_store(s3_location: S3Location, s3_endpoint_url: str) -> AsyncIterator[S3BlobStore]:
    store = S3BlobStore(
        s3_location.bucket,
        s3_location.prefix,
        endpoint_url=s3_endpoint_url,
        part_size=MIN_PART_SIZE,
        block_size=MiB,
        io_threads=4,
    )
    yield store
    await store.close()


class CallLog:
    """Which S3 operations the store sent, and the size of every uploaded part (recorded off the wire)."""

    def __init__(self, store: S3BlobStore) -> None:
        self.operations: list[str] = []
        self.part_sizes: list[int] = []
        store.client.meta.events.register("provide-client-params.s3.*", self._record)

    def _record(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        self.operations.append(model.name)
        if model.name == "UploadPart":
            self.part_sizes.append(len(params["Body"]))

    def count(self, operation: str) -> int:
        return self.operations.count(operation)


def data_of(size: int, seed: int) -> bytes:
    block = hashlib.sha256(seed.to_bytes(4, "big")).digest() * (MiB // 32)
    return (block * (size // len(block) + 1))[:size]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def pending_uploads(client: Any, location: S3Location) -> list[dict[str, Any]]:
    uploads: list[dict[str, Any]] = client.list_multipart_uploads(Bucket=location.bucket).get("Uploads", [])
    return uploads


def object_keys(client: Any, location: S3Location) -> list[str]:
    listed = client.list_objects_v2(Bucket=location.bucket, Prefix=f"{location.prefix}/")
    return sorted(item["Key"] for item in listed.get("Contents", []))


async def stage_all(store: S3BlobStore, ref: str, pieces: list[bytes]) -> list[Any]:
    await store.stage_begin(ref, chunk_size=max(len(p) for p in pieces))
    return [await store.stage_put(ref, i, chunks_of(p, 256 * 1024)) for i, p in enumerate(pieces)]


def test_endpoint_refuses_parts_below_the_s3_minimum(s3_client: Any, s3_location: S3Location) -> None:
    """Control: the endpoint enforces the 5 MiB minimum, so the aggregation tests below prove something."""
    key = f"{s3_location.prefix}/control"
    upload = s3_client.create_multipart_upload(Bucket=s3_location.bucket, Key=key)["UploadId"]
    parts = []
    for number in (1, 2):
        etag = s3_client.upload_part(
            Bucket=s3_location.bucket, Key=key, UploadId=upload, PartNumber=number, Body=b"x" * MiB
        )["ETag"]
        parts.append({"PartNumber": number, "ETag": etag})
    with pytest.raises(ClientError) as caught:
        s3_client.complete_multipart_upload(
            Bucket=s3_location.bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": parts}
        )
    assert caught.value.response["Error"]["Code"] == "EntityTooSmall"


async def test_commit_joins_small_chunks_into_parts_of_at_least_five_mib(
    s3_store: S3BlobStore, s3_client: Any, s3_location: S3Location
) -> None:
    pieces = [data_of(MiB, seed) for seed in range(6)]
    receipts = await stage_all(s3_store, "u_small", pieces)
    log = CallLog(s3_store)
    blob = await s3_store.stage_commit("u_small", receipts, expected_sha256=sha(b"".join(pieces)))
    # Five chunks joined into one 5 MiB part; the last chunk may be a smaller last part, copied server-side.
    assert log.part_sizes == [5 * MiB]
    assert log.count("UploadPartCopy") == 1
    assert log.count("CompleteMultipartUpload") == 1
    assert await read_all(s3_store, blob, 5 * MiB - 10, 20) == b"".join(pieces)[5 * MiB - 10 : 5 * MiB + 10]
    assert pending_uploads(s3_client, s3_location) == []


async def test_commit_copies_chunks_of_part_size_server_side(s3_store: S3BlobStore) -> None:
    pieces = [data_of(5 * MiB, 1), data_of(MiB // 2, 2)]
    receipts = await stage_all(s3_store, "u_big", pieces)
    log = CallLog(s3_store)
    blob = await s3_store.stage_commit("u_big", receipts)
    assert log.count("UploadPartCopy") == 2
    assert log.part_sizes == []
    assert blob.sha256 == sha(b"".join(pieces))
    assert await read_all(s3_store, blob, 5 * MiB - 3, 6) == b"".join(pieces)[5 * MiB - 3 : 5 * MiB + 3]


async def test_commit_after_a_small_chunk_streams_the_big_one_into_parts(s3_store: S3BlobStore) -> None:
    pieces = [data_of(MiB, 3), data_of(5 * MiB, 4)]
    receipts = await stage_all(s3_store, "u_mixed", pieces)
    log = CallLog(s3_store)
    blob = await s3_store.stage_commit("u_mixed", receipts)
    assert log.part_sizes == [5 * MiB, MiB]
    assert log.count("UploadPartCopy") == 0
    assert await read_all(s3_store, blob) == b"".join(pieces)


async def test_multipart_commit_with_a_wrong_digest_aborts_and_keeps_the_chunks(
    s3_store: S3BlobStore, s3_client: Any, s3_location: S3Location
) -> None:
    pieces = [data_of(MiB, seed) for seed in range(6)]
    receipts = await stage_all(s3_store, "u_wrong", pieces)
    with pytest.raises(DigestMismatch):
        await s3_store.stage_commit("u_wrong", receipts, expected_sha256=sha(b"other"))
    assert pending_uploads(s3_client, s3_location) == []
    assert await keys_of(s3_store) == set()
    staged = [f"{s3_location.prefix}/staging/u_wrong/{i}.{sha(piece)}" for i, piece in enumerate(pieces)]
    assert object_keys(s3_client, s3_location) == sorted(staged)


async def test_abort_during_commit_aborts_its_multipart_upload(
    s3_store: S3BlobStore, s3_client: Any, s3_location: S3Location
) -> None:
    pieces = [data_of(MiB, seed) for seed in range(6)]
    receipts = await stage_all(s3_store, "u_race", pieces)
    seen_open: list[int] = []

    async def abort_midway(done: int) -> None:
        if not seen_open:
            seen_open.append(len(pending_uploads(s3_client, s3_location)))
            await s3_store.stage_abort("u_race")

    with pytest.raises((UploadIncomplete, NotFound)):
        await s3_store.stage_commit("u_race", receipts, progress=abort_midway)
    assert seen_open == [1]
    assert pending_uploads(s3_client, s3_location) == []
    assert object_keys(s3_client, s3_location) == []


async def test_put_larger_than_a_part_streams_a_multipart_upload(
    s3_store: S3BlobStore, s3_client: Any, s3_location: S3Location
) -> None:
    data = data_of(6 * MiB + 5, 7)
    log = CallLog(s3_store)
    blob = await s3_store.put(chunks_of(data, 300_000), expected_size=len(data))
    assert log.count("CreateMultipartUpload") == 1
    assert log.count("PutObject") == 0
    assert log.part_sizes == [5 * MiB, MiB + 5]
    assert blob.key.startswith("blobs/_/")
    assert blob.sha256 == sha(data)
    assert await read_all(s3_store, blob, 6 * MiB - 1, 100) == data[6 * MiB - 1 :]
    assert object_keys(s3_client, s3_location) == [f"{s3_location.prefix}/{blob.key}"]


async def test_multipart_put_with_a_wrong_digest_leaves_nothing(
    s3_store: S3BlobStore, s3_client: Any, s3_location: S3Location
) -> None:
    data = data_of(6 * MiB, 8)
    with pytest.raises(DigestMismatch):
        await s3_store.put(chunks_of(data, MiB), expected_sha256=sha(data[1:]))
    assert pending_uploads(s3_client, s3_location) == []
    assert object_keys(s3_client, s3_location) == []


async def test_stale_multipart_uploads_are_aborted(
    s3_store: S3BlobStore, s3_client: Any, s3_location: S3Location
) -> None:
    s3_client.create_multipart_upload(
        Bucket=s3_location.bucket, Key=f"{s3_location.prefix}/blobs/_/ab/abandoned"
    )
    assert len(pending_uploads(s3_client, s3_location)) == 1
    assert await s3_store.sweep_temp(datetime.now(UTC) + timedelta(minutes=1)) == 1
    assert pending_uploads(s3_client, s3_location) == []


async def test_multipart_uploads_with_recent_parts_are_kept(
    s3_store: S3BlobStore, s3_client: Any, s3_location: S3Location
) -> None:
    started = datetime.now(UTC) - timedelta(minutes=5)
    key = f"{s3_location.prefix}/blobs/_/ab/busy"
    upload = s3_client.create_multipart_upload(Bucket=s3_location.bucket, Key=key)
    s3_client.upload_part(
        Bucket=s3_location.bucket, Key=key, UploadId=upload["UploadId"], PartNumber=1, Body=b"x" * 1024
    )
    assert await s3_store.abort_stale_multipart_uploads(started) == 0
    assert len(pending_uploads(s3_client, s3_location)) == 1
    # The same upload is stale once its newest part is older than the cut-off.
    assert await s3_store.abort_stale_multipart_uploads(datetime.now(UTC) + timedelta(minutes=1)) == 1
    assert pending_uploads(s3_client, s3_location) == []


async def test_cleanup_leaves_uploads_outside_the_prefix_alone(
    s3_store: S3BlobStore, s3_client: Any, s3_location: S3Location
) -> None:
    s3_client.create_multipart_upload(Bucket=s3_location.bucket, Key="someone-else/file")
    assert await s3_store.abort_stale_multipart_uploads(datetime.now(UTC) + timedelta(minutes=1)) == 0
    assert len(pending_uploads(s3_client, s3_location)) == 1


def conditional_refuser(refused: list[str]) -> Any:
    """A botocore hook answering any ``If-None-Match`` request with NotImplemented, as older endpoints do."""

    def refuse(params: dict[str, Any], model: Any, **_: Any) -> Any:
        if "If-None-Match" in params["headers"]:
            refused.append(model.name)
            error = {"Error": {"Code": "NotImplemented", "Message": "not implemented"}}
            return SimpleNamespace(status_code=501, headers={}), error
        return None

    return refuse


async def test_without_conditional_writes_a_conflicting_resend_is_still_refused(
    s3_location: S3Location, s3_endpoint_url: str
) -> None:
    store = S3BlobStore(
        s3_location.bucket, s3_location.prefix, endpoint_url=s3_endpoint_url, conditional_writes=False
    )
    await store.stage_begin("u_plain", chunk_size=100)
    first = await store.stage_put("u_plain", 0, chunks_of(b"a" * 100))
    assert await store.stage_put("u_plain", 0, chunks_of(b"a" * 100)) == first
    with pytest.raises(ChunkConflict):
        await store.stage_put("u_plain", 0, chunks_of(b"b" * 100))
    blob = await store.stage_commit("u_plain", [first])
    assert await read_all(store, blob) == b"a" * 100
    await store.close()


async def test_an_endpoint_refusing_conditional_writes_is_detected_and_served(
    s3_store: S3BlobStore,
) -> None:
    """Older endpoints answer If-None-Match with NotImplemented; that answer is injected before the client."""
    refused: list[str] = []
    refuse_conditional = conditional_refuser(refused)
    s3_store.client.meta.events.register("before-call.s3.PutObject", refuse_conditional)
    blob = await s3_store.put(chunks_of(b"0123456789"))
    assert not s3_store.conditional_writes
    assert await read_all(s3_store, blob) == b"0123456789"
    assert refused == ["PutObject"]


async def test_staging_a_chunk_needs_no_conditional_write(s3_store: S3BlobStore) -> None:
    refused: list[str] = []
    s3_store.client.meta.events.register("before-call.s3.PutObject", conditional_refuser(refused))
    await s3_store.stage_begin("u_plain", chunk_size=10)
    receipt = await s3_store.stage_put("u_plain", 0, chunks_of(b"0123456789"))
    with pytest.raises(ChunkConflict):
        await s3_store.stage_put("u_plain", 0, chunks_of(b"9876543210"))
    assert refused == []
    blob = await s3_store.stage_commit("u_plain", [receipt])
    assert await read_all(s3_store, blob) == b"0123456789"


async def test_a_multipart_completion_without_conditional_writes_falls_back(s3_store: S3BlobStore) -> None:
    refused: list[str] = []
    refuse_conditional = conditional_refuser(refused)
    s3_store.client.meta.events.register("before-call.s3.CompleteMultipartUpload", refuse_conditional)
    data = data_of(5 * MiB + 100, 9)
    blob = await s3_store.put(chunks_of(data, MiB))
    assert refused == ["CompleteMultipartUpload"]
    assert not s3_store.conditional_writes
    assert await read_all(s3_store, blob, 5 * MiB, 100) == data[5 * MiB :]


async def test_presigned_url_serves_ranges_and_names_the_file(s3_store: S3BlobStore) -> None:
    data = os.urandom(3000)
    blob = await s3_store.put(chunks_of(data))
    assert isinstance(s3_store, SupportsPresign)
    url = await s3_store.presigned_url(blob, expires_in=60, filename="report ä.pdf")
    async with httpx.AsyncClient() as http:
        response = await http.get(url, headers={"Range": "bytes=10-19"})
    assert response.status_code == 206
    assert response.content == data[10:20]
    assert response.headers["content-disposition"] == content_disposition("report ä.pdf")
    assert "filename*=UTF-8''report%20%C3%A4.pdf" in content_disposition("report ä.pdf")


async def test_presigned_download_names_the_file_exactly_like_the_http_edge(s3_store: S3BlobStore) -> None:
    blob = await s3_store.put(chunks_of(b"x"))
    url = await s3_store.presigned_url(blob, expires_in=60, filename='Bericht "Q3" ü.txt')
    async with httpx.AsyncClient() as http:
        response = await http.get(url)
    assert response.headers["content-disposition"] == (
        'attachment; filename="Bericht \\"Q3\\" u.txt"; filename*=UTF-8\'\'Bericht%20%22Q3%22%20%C3%BC.txt'
    )


async def test_unreachable_endpoint_is_storage_unavailable() -> None:
    store = open_blob_store("s3://bucket/prefix", s3_endpoint_url=f"http://127.0.0.1:{free_port()}")
    with pytest.raises(StorageUnavailable):
        await store.check()
    with pytest.raises(StorageUnavailable):
        await store.put(chunks_of(b"data"))
    await store.close()


async def test_missing_bucket_fails_the_readiness_check(s3_endpoint_url: str) -> None:
    store = open_blob_store("s3://no-such-bucket-here/p", s3_endpoint_url=s3_endpoint_url)
    with pytest.raises(StorageUnavailable):
        await store.check()
    await store.close()

"""S3 behaviour that must hold on every S3 implementation: moto, and s3rver, which has no UploadPartCopy, no
AbortMultipartUpload, no ListMultipartUploads and ignores ``If-None-Match``.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from blobstore.errors import ChunkConflict, DigestMismatch, StorageUnavailable
from blobstore.storage.s3 import MIN_PART_SIZE, S3BlobStore, S3Capabilities
from tests.fixtures.s3 import S3Endpoint, S3Location
from tests.fixtures.s3rver import S3rverEndpoint
from tests.storage.conftest import S3_ENDPOINTS, chunks_of, keys_of, read_all

pytestmark = pytest.mark.s3

MiB = 1024 * 1024


class Endpoint:
    """One S3 implementation with a bucket of its own for the test."""

    def __init__(self, name: str, endpoint: S3Endpoint, client: Any, location: S3Location) -> None:
        self.name = name
        self.endpoint = endpoint
        self.client = client
        self.location = location

    def pending_uploads(self) -> list[str]:
        """Multipart uploads still open in the bucket, however the implementation lets us see them."""
        if isinstance(self.endpoint, S3rverEndpoint):
            return [path.name for path in self.endpoint.pending_upload_dirs(self.location.bucket)]
        listed = self.client.list_multipart_uploads(Bucket=self.location.bucket)
        return [upload["UploadId"] for upload in listed.get("Uploads", [])]

    def object_keys(self) -> list[str]:
        listed = self.client.list_objects_v2(Bucket=self.location.bucket)
        return sorted(item["Key"] for item in listed.get("Contents", []))

    def store(self, **options: Any) -> S3BlobStore:
        return S3BlobStore(
            self.location.bucket,
            self.location.prefix,
            endpoint_url=self.endpoint.endpoint_url,
            part_size=MIN_PART_SIZE,
            block_size=MiB,
            io_threads=4,
            **options,
        )


@pytest.fixture(params=S3_ENDPOINTS)
def endpoint(request: pytest.FixtureRequest) -> Endpoint:
    name: str = request.param
    return Endpoint(
        name,
        request.getfixturevalue(f"{name}_endpoint"),
        request.getfixturevalue(f"{name}_client"),
        request.getfixturevalue(f"{name}_location"),
    )


@pytest.fixture
async def store(endpoint: Endpoint) -> AsyncIterator[S3BlobStore]:
    opened = endpoint.store()
    yield opened
    await opened.close()


def data_of(size: int, seed: int) -> bytes:
    block = hashlib.sha256(seed.to_bytes(4, "big")).digest() * (MiB // 32)
    return (block * (size // len(block) + 1))[:size]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


async def stage_all(store: S3BlobStore, ref: str, pieces: list[bytes]) -> list[Any]:
    await store.stage_begin(ref, chunk_size=max(len(p) for p in pieces))
    return [await store.stage_put(ref, i, chunks_of(p, 256 * 1024)) for i, p in enumerate(pieces)]


async def test_commit_of_part_sized_chunks_publishes_the_exact_bytes(
    store: S3BlobStore, endpoint: Endpoint
) -> None:
    pieces = [data_of(5 * MiB, 1), data_of(5 * MiB, 2), data_of(MiB + 7, 3)]
    receipts = await stage_all(store, "u_big", pieces)
    data = b"".join(pieces)
    blob = await store.stage_commit("u_big", receipts, expected_size=len(data), expected_sha256=sha(data))
    assert blob.sha256 == sha(data)
    assert await read_all(store, blob) == data
    assert endpoint.pending_uploads() == []


async def test_a_conflicting_chunk_keeps_the_first_copy_and_commit_joins_it(store: S3BlobStore) -> None:
    await store.stage_begin("u_conflict", chunk_size=5 * MiB)
    first = data_of(5 * MiB, 1)
    receipt = await store.stage_put("u_conflict", 0, chunks_of(first, MiB))
    with pytest.raises(ChunkConflict):
        await store.stage_put("u_conflict", 0, chunks_of(data_of(5 * MiB, 2), MiB))
    tail = await store.stage_put("u_conflict", 1, chunks_of(b"tail"))
    blob = await store.stage_commit("u_conflict", [receipt, tail], expected_sha256=sha(first + b"tail"))
    assert await read_all(store, blob) == first + b"tail"


async def test_racing_different_copies_leave_the_recorded_one_to_the_commit(
    store: S3BlobStore, endpoint: Endpoint
) -> None:
    """Two different copies of a chunk may both land when they race; the commit reads the recorded one."""
    await store.stage_begin("u_race", chunk_size=100)
    recorded = await store.stage_put("u_race", 0, chunks_of(b"a" * 100))
    # The losing writer's copy, landed after its check found nothing (written here behind the store's back).
    endpoint.client.put_object(
        Bucket=endpoint.location.bucket,
        Key=f"{endpoint.location.prefix}/staging/u_race/0.{sha(b'b' * 100)}",
        Body=b"b" * 100,
    )
    blob = await store.stage_commit("u_race", [recorded])
    assert await read_all(store, blob) == b"a" * 100
    await store.stage_abort("u_race")
    assert [key for key in endpoint.object_keys() if "/staging/" in key] == []


async def test_a_refused_multipart_commit_leaves_no_upload_and_keeps_the_chunks(
    store: S3BlobStore, endpoint: Endpoint
) -> None:
    pieces = [data_of(5 * MiB, 1), data_of(MiB, 2)]
    receipts = await stage_all(store, "u_wrong", pieces)
    with pytest.raises(DigestMismatch):
        await store.stage_commit("u_wrong", receipts, expected_sha256=sha(b"other"))
    assert endpoint.pending_uploads() == []
    assert await keys_of(store) == set()
    blob = await store.stage_commit("u_wrong", receipts)
    assert await read_all(store, blob) == b"".join(pieces)


async def test_a_refused_large_put_leaves_no_upload_and_no_object(
    store: S3BlobStore, endpoint: Endpoint
) -> None:
    with pytest.raises(DigestMismatch):
        await store.put(chunks_of(data_of(6 * MiB, 4), MiB), expected_sha256=sha(b"other"))
    assert endpoint.pending_uploads() == []
    assert endpoint.object_keys() == []


async def test_aborting_a_commit_marker_frees_its_upload_and_the_staging_area(
    store: S3BlobStore, endpoint: Endpoint
) -> None:
    """A commit that died mid-way (another replica) leaves a marker naming its open multipart upload."""
    pieces = [data_of(5 * MiB, 1), data_of(MiB, 2)]
    await stage_all(store, "u_dead", pieces)
    target = f"{endpoint.location.prefix}/blobs/_/ab/abandoned"
    upload_id = endpoint.client.create_multipart_upload(Bucket=endpoint.location.bucket, Key=target)[
        "UploadId"
    ]
    endpoint.client.upload_part(
        Bucket=endpoint.location.bucket, Key=target, UploadId=upload_id, PartNumber=1, Body=b"x" * MiB
    )
    endpoint.client.put_object(
        Bucket=endpoint.location.bucket,
        Key=f"{endpoint.location.prefix}/staging/u_dead/multipart",
        Body=f'{{"key": "{target}", "upload_id": "{upload_id}"}}'.encode(),
    )
    await store.stage_abort("u_dead")
    assert endpoint.pending_uploads() == []
    assert endpoint.object_keys() == []


async def test_probe_finds_what_the_endpoint_supports_and_leaves_nothing(
    store: S3BlobStore, endpoint: Endpoint
) -> None:
    capabilities = await store.probe()
    found = {"s3": True, "s3rver": False}[endpoint.name]
    assert capabilities == S3Capabilities(found, found, found, location=store.location)
    # The line `blobstore serve` prints at start (docs/operations.md).
    word = "yes" if found else "no"
    assert str(capabilities) == (
        f"S3 bucket s3://{endpoint.location.bucket}/{endpoint.location.prefix} at "
        f"{endpoint.endpoint.endpoint_url}: conditional writes {word}, UploadPartCopy {word}, "
        f"AbortMultipartUpload {word}"
    )
    assert endpoint.pending_uploads() == []
    assert endpoint.object_keys() == []


async def test_probe_of_a_missing_bucket_names_the_bucket_and_endpoint(endpoint: Endpoint) -> None:
    missing = S3BlobStore("no-such-bucket-here", "p", endpoint_url=endpoint.endpoint.endpoint_url)
    with pytest.raises(StorageUnavailable) as caught:
        await missing.probe()
    await missing.close()
    assert "no-such-bucket-here" in caught.value.message
    assert endpoint.endpoint.endpoint_url in caught.value.message
    assert caught.value.operation == "HeadBucket"


async def test_storage_errors_name_the_operation_and_the_backend_code(
    store: S3BlobStore, endpoint: Endpoint, caplog: pytest.LogCaptureFixture
) -> None:
    endpoint.client.delete_bucket(Bucket=endpoint.location.bucket)
    try:
        with pytest.raises(StorageUnavailable) as caught:
            await store.put(chunks_of(b"data"))
    finally:
        endpoint.client.create_bucket(Bucket=endpoint.location.bucket)
    assert (caught.value.operation, caught.value.backend_code) == ("PutObject", "NoSuchBucket")
    assert "PutObject" in repr(caught.value)
    assert "NoSuchBucket" in repr(caught.value)
    assert any("PutObject" in r.getMessage() and "NoSuchBucket" in r.getMessage() for r in caplog.records)
    assert "testing" not in caplog.text

"""Direct uploads: parts PUT straight to S3 through presigned URLs, verified by the server at completion."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from blobstore.client import AsyncBlobstoreClient
from blobstore.service import ArtifactService
from tests.presign.conftest import MiB, S3Place

pytestmark = pytest.mark.s3

PART = 5 * MiB


async def begin(api: httpx.AsyncClient, data: bytes, **extra: Any) -> dict[str, Any]:
    body = {
        "name": "direct.bin",
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "direct": True,
        **extra,
    }
    response = await api.post("/v1/uploads", json=body)
    assert response.status_code == 201, response.text
    begun: dict[str, Any] = response.json()
    return begun


async def put_parts(
    storage_http: httpx.AsyncClient, offer: dict[str, Any], parts: list[bytes]
) -> list[dict[str, Any]]:
    """PUT the parts to their URLs; returns them with their ETags, as the completion takes them."""
    urls = {part["part_number"]: part["url"] for part in offer["parts"]}
    sent = []
    for number, data in enumerate(parts, start=1):
        response = await storage_http.put(urls[number], content=data)
        assert response.status_code == 200, response.text
        sent.append({"part_number": number, "etag": response.headers["etag"]})
    return sent


def split(data: bytes, size: int) -> list[bytes]:
    return [data[start : start + size] for start in range(0, len(data), size)]


async def test_the_client_uploads_12_mib_through_presigned_parts_and_ranged_reads_match(
    api: httpx.AsyncClient, blob_client: AsyncBlobstoreClient, s3_place: S3Place, tmp_path: Path
) -> None:
    data = os.urandom(12 * MiB + 123)
    source = tmp_path / "big.bin"
    source.write_bytes(data)
    sent: list[httpx.Request] = []

    async def record(request: httpx.Request) -> None:
        sent.append(request)

    blob_client._direct_http.event_hooks["request"].append(record)
    result = await blob_client.upload(source)
    assert result.chunk_size == PART
    assert sorted(request.url.params["partNumber"] for request in sent if request.method == "PUT") == [
        "1",
        "2",
        "3",
    ]
    artifact = result.artifact
    assert artifact.size == len(data)
    assert artifact.sha256 == hashlib.sha256(data).hexdigest()
    # Windows are served by the API, through the XXH3-checked read path.
    url = f"/v1/artifacts/{artifact.id}/content"
    for offset, length in [(0, 1000), (PART - 10, 20), (12 * MiB, 123), (7 * MiB + 1, MiB)]:
        window = await api.get(url, params={"offset": str(offset), "length": str(length)})
        assert window.content == data[offset : offset + length]
    assert s3_place.multipart_uploads() == []


async def test_the_begin_answer_offers_s3_parts_and_chunks_are_refused(
    api: httpx.AsyncClient, storage_http: httpx.AsyncClient, s3_place: S3Place
) -> None:
    data = os.urandom(PART + 10)
    begun = await begin(api, data)
    assert begun["direct"] is True
    assert begun["direct_offered"] is True
    undeclared = await api.post("/v1/uploads", json={"name": "later.bin", "size": len(data), "direct": True})
    # Without a sha256 the upload is an ordinary one, but the answer says a direct one was to be had.
    assert (undeclared.json()["direct"], undeclared.json()["direct_offered"]) == (False, True)
    offer = begun["direct_parts"]
    assert offer["part_size"] == PART == begun["chunk_size"]
    assert offer["part_count"] == 2
    assert [(p["part_number"], p["size"]) for p in offer["parts"]] == [(1, PART), (2, 10)]
    refused = await api.put(f"/v1/uploads/{begun['upload_id']}/chunks/0", content=data[:PART])
    assert refused.status_code == 409
    assert refused.json()["code"] == "conflict"
    status = await api.get(f"/v1/uploads/{begun['upload_id']}")
    assert status.json()["direct"] is True
    assert len(s3_place.multipart_uploads()) == 1


async def test_a_part_with_wrong_bytes_is_a_digest_mismatch_and_nothing_is_visible(
    api: httpx.AsyncClient, storage_http: httpx.AsyncClient, s3_place: S3Place
) -> None:
    data = os.urandom(2 * PART + 1000)
    begun = await begin(api, data)
    [before] = s3_place.multipart_uploads()
    parts = split(data, PART)
    parts[1] = os.urandom(PART)  # right length, wrong bytes
    sent = await put_parts(storage_http, begun["direct_parts"], parts)
    upload_id = begun["upload_id"]
    failed = await api.post(f"/v1/uploads/{upload_id}/complete", json={"parts": sent})
    assert failed.status_code == 422
    assert failed.json()["code"] == "digest_mismatch"
    assert (await api.get("/v1/artifacts")).json()["items"] == []
    assert s3_place.blob_keys() == []
    # The multipart upload with the wrong part is gone; the upload is open again with a fresh, empty one.
    assert before not in s3_place.multipart_uploads()
    status = await api.get(f"/v1/uploads/{upload_id}")
    assert status.json()["state"] == "open"
    fresh = await api.post(f"/v1/uploads/{upload_id}/parts")
    assert fresh.status_code == 200
    sent = await put_parts(storage_http, fresh.json(), split(data, PART))
    completed = await api.post(f"/v1/uploads/{upload_id}/complete", json={"parts": sent})
    assert completed.status_code == 201, completed.text
    content = await api.get(f"/v1/artifacts/{completed.json()['id']}/content", params={"offset": "0"})
    assert content.content == data[: len(content.content)]


async def test_a_missing_part_leaves_the_upload_open_to_fix(
    api: httpx.AsyncClient, storage_http: httpx.AsyncClient
) -> None:
    data = os.urandom(PART + 77)
    begun = await begin(api, data)
    upload_id = begun["upload_id"]
    [first, second] = split(data, PART)
    urls = {p["part_number"]: p["url"] for p in begun["direct_parts"]["parts"]}
    etag_2 = (await storage_http.put(urls[2], content=second)).headers["etag"]
    missing = await api.post(
        f"/v1/uploads/{upload_id}/complete", json={"parts": [{"part_number": 2, "etag": etag_2}]}
    )
    assert missing.status_code == 422
    assert missing.json()["code"] == "upload_incomplete"
    assert missing.json()["missing"] == [1]
    etag_1 = (await storage_http.put(urls[1], content=first)).headers["etag"]
    parts = [{"part_number": 1, "etag": etag_1}, {"part_number": 2, "etag": etag_2}]
    completed = await api.post(f"/v1/uploads/{upload_id}/complete", json={"parts": parts})
    assert completed.status_code == 201, completed.text
    assert completed.json()["sha256"] == hashlib.sha256(data).hexdigest()


async def test_a_short_part_is_refused_before_completion_where_parts_can_be_listed(
    api: httpx.AsyncClient, storage_http: httpx.AsyncClient, s3_place: S3Place
) -> None:
    data = os.urandom(PART + 77)
    begun = await begin(api, data)
    upload_id = begun["upload_id"]
    [first, second] = split(data, PART)
    sent = await put_parts(storage_http, begun["direct_parts"], [first[:-1], second])
    short = await api.post(f"/v1/uploads/{upload_id}/complete", json={"parts": sent})
    assert short.status_code == 422
    if s3_place.name == "s3rver":
        # s3rver has no ListParts: the read-back finds the size wrong, and the parts start over.
        assert short.json()["code"] == "size_mismatch"
        offer = (await api.post(f"/v1/uploads/{upload_id}/parts")).json()
        sent = await put_parts(storage_http, offer, [first, second])
    else:
        assert short.json()["code"] == "chunk_size_invalid"
        sent = await put_parts(storage_http, begun["direct_parts"], [first, second])
    completed = await api.post(f"/v1/uploads/{upload_id}/complete", json={"parts": sent})
    assert completed.status_code == 201, completed.text
    assert len(s3_place.blob_keys()) == 1


async def test_abort_aborts_the_s3_multipart_upload(
    api: httpx.AsyncClient, storage_http: httpx.AsyncClient, s3_place: S3Place
) -> None:
    data = os.urandom(PART + 1)
    begun = await begin(api, data)
    await put_parts(storage_http, begun["direct_parts"], split(data, PART)[:1])
    assert len(s3_place.multipart_uploads()) == 1
    assert (await api.delete(f"/v1/uploads/{begun['upload_id']}")).status_code == 204
    assert s3_place.multipart_uploads() == []
    assert s3_place.blob_keys() == []


async def test_expiry_aborts_the_s3_multipart_upload(
    api: httpx.AsyncClient, service: ArtifactService, s3_place: S3Place
) -> None:
    from datetime import timedelta

    from blobstore.cleanup import run_cleanup
    from blobstore.runtime import cleanup_parts

    data = os.urandom(100)
    await begin(api, data)
    assert len(s3_place.multipart_uploads()) == 1
    later = service.clock() + timedelta(seconds=service.settings.upload_ttl_seconds + 1)
    service.clock.source = lambda: later
    await run_cleanup(cleanup_parts(service))
    assert s3_place.multipart_uploads() == []


async def test_fresh_part_urls_are_given_for_the_parts_asked(api: httpx.AsyncClient) -> None:
    data = os.urandom(3 * PART)
    begun = await begin(api, data)
    fresh = await api.post(f"/v1/uploads/{begun['upload_id']}/parts", json={"part_numbers": [3]})
    assert [p["part_number"] for p in fresh.json()["parts"]] == [3]
    outside = await api.post(f"/v1/uploads/{begun['upload_id']}/parts", json={"part_numbers": [4]})
    assert outside.status_code == 422
    assert outside.json()["code"] == "chunk_index_out_of_range"


async def test_a_direct_upload_of_content_already_stored_is_deduplicated(
    api: httpx.AsyncClient, storage_http: httpx.AsyncClient, s3_place: S3Place
) -> None:
    data = os.urandom(1000)
    first = await api.post("/v1/artifacts", params={"name": "one.bin"}, content=data)
    begun = await begin(api, data)
    sent = await put_parts(storage_http, begun["direct_parts"], [data])
    completed = await api.post(f"/v1/uploads/{begun['upload_id']}/complete", json={"parts": sent})
    assert completed.status_code == 201
    assert completed.json()["sha256"] == first.json()["sha256"]
    assert len(s3_place.blob_keys()) == 1


async def test_a_completion_left_by_a_stopped_completer_is_verified_on_a_copy_of_its_own(
    api: httpx.AsyncClient, storage_http: httpx.AsyncClient, s3_place: S3Place
) -> None:
    data = os.urandom(PART + 300)
    begun = await begin(api, data)
    upload_id = begun["upload_id"]
    sent = await put_parts(storage_http, begun["direct_parts"], split(data, PART))
    # A completer completed the S3 multipart upload, then stopped before its commit.
    location = s3_place.location
    marker = s3_place.client.get_object(
        Bucket=location.bucket, Key=f"{location.prefix}/staging/{upload_id}/multipart"
    )
    record = json.loads(marker["Body"].read())
    s3_place.client.complete_multipart_upload(
        Bucket=location.bucket,
        Key=record["key"],
        UploadId=record["upload_id"],
        MultipartUpload={"Parts": [{"PartNumber": p["part_number"], "ETag": p["etag"]} for p in sent]},
    )
    completed = await api.post(f"/v1/uploads/{upload_id}/complete", json={"parts": sent})
    assert completed.status_code == 201, completed.text
    # The stopped completer's object stays its own (an orphan for the sweep); the artifact has a copy.
    assert record["key"] in s3_place.blob_keys()
    assert len(s3_place.blob_keys()) == 2
    artifact_id = completed.json()["id"]
    window = await api.get(
        f"/v1/artifacts/{artifact_id}/content", params={"offset": str(PART - 5), "length": "10"}
    )
    assert window.content == data[PART - 5 : PART + 5]

"""Chunked uploads over HTTP: create, chunks in any order with checksums, status, complete, abort."""

from __future__ import annotations

import base64
import hashlib
import os
from typing import Any

import anyio
import httpx
import pytest
import xxhash

CHUNK = 1024
DATA = os.urandom(CHUNK * 4 + 100)  # five chunks, the last one short
SHA = hashlib.sha256(DATA).hexdigest()


def chunk(index: int, data: bytes = DATA) -> bytes:
    return data[index * CHUNK : (index + 1) * CHUNK]


def content_digest(data: bytes) -> str:
    return f"sha-256=:{base64.b64encode(hashlib.sha256(data).digest()).decode()}:"


async def begin(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    payload = {"name": "upload.bin", "size": len(DATA), "chunk_size": CHUNK, **body}
    response = await client.post("/v1/uploads", json=payload)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def put(
    client: httpx.AsyncClient, upload_id: str, index: int, data: bytes, **headers: str
) -> httpx.Response:
    return await client.put(f"/v1/uploads/{upload_id}/chunks/{index}", content=data, headers=headers)


async def test_create_answers_the_chosen_chunk_size_limits_and_expiry(client: httpx.AsyncClient) -> None:
    created = await begin(client)
    assert created["upload_id"].startswith("u_")
    assert created["chunk_size"] == CHUNK
    assert created["chunk_count"] == 5
    assert created["state"] == "open"
    assert created["limits"] == {
        "min_chunk_size": 16,
        "max_chunk_size": 64 * 1024,
        "max_chunks": 10_000,
        "max_artifact_size": 5 * 1024**3,
    }
    assert created["expires_at"]


async def test_server_chooses_a_chunk_size_when_none_is_asked(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/uploads", json={"name": "a.bin"})
    assert response.status_code == 201
    assert response.json()["chunk_size"] == 1024  # the default_chunk_size of the test settings
    assert response.headers["location"] == f"/v1/uploads/{response.json()['upload_id']}"


async def test_out_of_order_parallel_chunks_with_resend_complete_to_the_right_bytes(
    client: httpx.AsyncClient,
) -> None:
    upload_id = (await begin(client, sha256=SHA))["upload_id"]
    responses: list[httpx.Response] = []

    async def send(index: int) -> None:
        responses.append(
            await put(
                client, upload_id, index, chunk(index), **{"Content-Digest": content_digest(chunk(index))}
            )
        )

    async with anyio.create_task_group() as group:
        for index in (4, 2, 0, 3, 1, 2):  # chunk 2 twice: the resend with the same bytes is a success
            group.start_soon(send, index)
    assert [r.status_code for r in responses] == [200] * 6
    status = (await client.get(f"/v1/uploads/{upload_id}")).json()
    assert status["chunks_received"] == [0, 1, 2, 3, 4]
    assert status["bytes_received"] == len(DATA)
    assert status["missing"] == []
    done = await client.post(f"/v1/uploads/{upload_id}/complete")
    assert done.status_code == 201, done.text
    artifact = done.json()
    assert artifact["sha256"] == SHA
    assert artifact["size"] == len(DATA)
    assert artifact["uri"] == f"blobstore://artifacts/{artifact['id']}"
    assert artifact["resource_link"]["type"] == "resource_link"
    body = await client.get(f"/v1/artifacts/{artifact['id']}/content")
    assert body.content == DATA


async def test_chunk_answer_reports_its_checksums(client: httpx.AsyncClient) -> None:
    upload_id = (await begin(client))["upload_id"]
    response = await put(client, upload_id, 1, chunk(1))
    assert response.json() == {
        "upload_id": upload_id,
        "index": 1,
        "size": CHUNK,
        "sha256": hashlib.sha256(chunk(1)).hexdigest(),
        "xxh3": xxhash.xxh3_128_hexdigest(chunk(1)),
    }


async def test_status_lists_what_is_missing(client: httpx.AsyncClient) -> None:
    upload_id = (await begin(client))["upload_id"]
    await put(client, upload_id, 3, chunk(3))
    status = (await client.get(f"/v1/uploads/{upload_id}")).json()
    assert status["missing"] == [0, 1, 2, 4]
    assert status["chunks_received"] == [3]
    assert status["bytes_received"] == CHUNK
    assert status["state"] == "open"


async def test_same_index_with_different_bytes_is_409(client: httpx.AsyncClient) -> None:
    upload_id = (await begin(client))["upload_id"]
    assert (await put(client, upload_id, 0, chunk(0))).status_code == 200
    other = await put(client, upload_id, 0, bytes(CHUNK))
    assert other.status_code == 409
    assert other.json()["code"] == "chunk_conflict"
    done_status = (await client.get(f"/v1/uploads/{upload_id}")).json()
    assert done_status["bytes_received"] == CHUNK


@pytest.mark.parametrize(
    ("index", "data", "code"),
    [
        (0, DATA[: CHUNK - 1], "chunk_size_invalid"),  # a non-last chunk must be full
        (4, DATA[4 * CHUNK :] + b"x", "chunk_size_invalid"),  # the last chunk has an exact length too
        (0, DATA[: CHUNK + 1], "chunk_size_invalid"),  # longer than chunk_size: refused from Content-Length
        (5, b"x", "chunk_index_out_of_range"),  # past the declared size
    ],
)
async def test_wrong_chunks_are_refused_with_a_code_that_says_why_and_not_kept(
    client: httpx.AsyncClient, index: int, data: bytes, code: str
) -> None:
    upload_id = (await begin(client))["upload_id"]
    response = await put(client, upload_id, index, data)
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["code"] == code
    status = (await client.get(f"/v1/uploads/{upload_id}")).json()
    assert status["chunks_received"] == []


@pytest.mark.parametrize(
    "headers",
    [
        {"Content-Digest": content_digest(b"something else")},
        {"X-Chunk-XXH3": xxhash.xxh3_128_hexdigest(b"something else")},
    ],
)
async def test_bad_chunk_checksum_is_refused_and_the_chunk_not_kept(
    client: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    upload_id = (await begin(client))["upload_id"]
    response = await put(client, upload_id, 0, chunk(0), **headers)
    assert response.status_code == 422
    assert response.json()["code"] == "checksum_mismatch"
    assert (await client.get(f"/v1/uploads/{upload_id}")).json()["chunks_received"] == []


async def test_matching_xxh3_header_is_accepted(client: httpx.AsyncClient) -> None:
    upload_id = (await begin(client))["upload_id"]
    response = await put(
        client, upload_id, 0, chunk(0), **{"X-Chunk-XXH3": xxhash.xxh3_128_hexdigest(chunk(0))}
    )
    assert response.status_code == 200


@pytest.mark.parametrize(
    "headers",
    [{"Content-Digest": "sha-256=not-base64"}, {"Content-Digest": "sha-256=:AAAA:"}, {"X-Chunk-XXH3": "xyz"}],
)
async def test_malformed_checksum_headers_are_400(client: httpx.AsyncClient, headers: dict[str, str]) -> None:
    upload_id = (await begin(client))["upload_id"]
    response = await put(client, upload_id, 0, chunk(0), **headers)
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"


async def test_completing_with_missing_chunks_says_which(client: httpx.AsyncClient) -> None:
    upload_id = (await begin(client))["upload_id"]
    for index in (0, 1, 3):
        await put(client, upload_id, index, chunk(index))
    response = await client.post(f"/v1/uploads/{upload_id}/complete")
    assert response.status_code == 422
    problem = response.json()
    assert problem["code"] == "upload_incomplete"
    assert problem["missing"] == [2, 4]
    # The upload stays open: send the rest and complete.
    for index in (2, 4):
        await put(client, upload_id, index, chunk(index))
    assert (await client.post(f"/v1/uploads/{upload_id}/complete")).status_code == 201


async def test_complete_with_a_wrong_sha256_is_422_and_the_upload_stays_open(
    client: httpx.AsyncClient,
) -> None:
    upload_id = (await begin(client))["upload_id"]
    for index in range(5):
        await put(client, upload_id, index, chunk(index))
    response = await client.post(f"/v1/uploads/{upload_id}/complete", json={"sha256": "0" * 64})
    assert response.status_code == 422
    assert response.json()["code"] == "digest_mismatch"
    assert (await client.get(f"/v1/uploads/{upload_id}")).json()["state"] == "open"
    fixed = await client.post(f"/v1/uploads/{upload_id}/complete", json={"sha256": SHA})
    assert fixed.status_code == 201


async def test_completing_twice_returns_the_same_artifact(client: httpx.AsyncClient) -> None:
    upload_id = (await begin(client))["upload_id"]
    for index in range(5):
        await put(client, upload_id, index, chunk(index))
    first = await client.post(f"/v1/uploads/{upload_id}/complete", json={"sha256": SHA})
    second = await client.post(f"/v1/uploads/{upload_id}/complete")
    assert first.status_code == second.status_code == 201
    assert first.json()["id"] == second.json()["id"]
    status = (await client.get(f"/v1/uploads/{upload_id}")).json()
    assert status["state"] == "completed"
    assert status["artifact_id"] == first.json()["id"]


async def test_chunk_after_completion_is_409(client: httpx.AsyncClient) -> None:
    upload_id = (await begin(client))["upload_id"]
    for index in range(5):
        await put(client, upload_id, index, chunk(index))
    await client.post(f"/v1/uploads/{upload_id}/complete")
    late = await put(client, upload_id, 0, chunk(0))
    assert late.status_code == 409
    assert late.json()["code"] == "upload_not_open"


async def test_late_chunk_racing_completion_never_changes_the_artifact(client: httpx.AsyncClient) -> None:
    upload_id = (await begin(client))["upload_id"]
    for index in range(5):
        await put(client, upload_id, index, chunk(index))
    results: dict[str, httpx.Response] = {}

    async def complete() -> None:
        results["complete"] = await client.post(f"/v1/uploads/{upload_id}/complete")

    async def late() -> None:
        results["late"] = await put(client, upload_id, 1, bytes(CHUNK))

    async with anyio.create_task_group() as group:
        group.start_soon(complete)
        group.start_soon(late)
    assert results["late"].status_code == 409
    if results["complete"].status_code != 201:
        results["complete"] = await client.post(f"/v1/uploads/{upload_id}/complete")
    artifact = results["complete"].json()
    assert artifact["sha256"] == SHA
    assert (await client.get(f"/v1/artifacts/{artifact['id']}/content")).content == DATA


async def test_abort_frees_the_upload_and_it_is_gone_afterwards(client: httpx.AsyncClient) -> None:
    upload_id = (await begin(client))["upload_id"]
    await put(client, upload_id, 0, chunk(0))
    response = await client.delete(f"/v1/uploads/{upload_id}")
    assert response.status_code == 204
    gone = await client.get(f"/v1/uploads/{upload_id}")
    assert (gone.status_code, gone.json()["code"]) == (404, "not_found")
    assert (await put(client, upload_id, 1, chunk(1))).json()["code"] == "upload_not_open"
    assert (await client.post(f"/v1/uploads/{upload_id}/complete")).status_code == 409
    assert (await client.delete(f"/v1/uploads/{upload_id}")).status_code == 204  # idempotent


async def test_unknown_upload_is_404(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/uploads/u_AAAAAAAAAAAAAAAAAAAAAAAA")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"size": 10}, "name"),
        ({"name": "a", "size": -1}, "size"),
        ({"name": "a", "unknown": 1}, "unknown"),
    ],
)
async def test_invalid_create_bodies_are_400_problems_naming_the_field(
    client: httpx.AsyncClient, body: dict[str, Any], field: str
) -> None:
    response = await client.post("/v1/uploads", json=body)
    assert response.status_code == 400
    problem = response.json()
    assert problem["code"] == "invalid_request"
    assert any(field in error["loc"] for error in problem["errors"])


@pytest.mark.parametrize(
    ("member", "value"),
    [("ttl_seconds", "6"), ("chunk_size", "1024"), ("size", "10"), ("ttl_seconds", True)],
)
async def test_an_integer_member_takes_a_json_number_only(
    client: httpx.AsyncClient, member: str, value: object
) -> None:
    response = await client.post("/v1/uploads", json={"name": "a.bin", member: value})
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    assert member in response.text


async def test_an_integral_json_number_is_an_integer(client: httpx.AsyncClient) -> None:
    # JSON Schema's "integer" includes 3600.0; the OpenAPI document promises what JSON Schema means.
    response = await client.post("/v1/uploads", json={"name": "a.bin", "ttl_seconds": 3600.0})
    assert response.status_code == 201


async def test_chunk_size_outside_the_limits_is_refused(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/uploads", json={"name": "a", "chunk_size": 8})
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"


async def test_json_body_over_the_limit_is_413(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/uploads", json={"name": "a", "metadata": {"pad": "x" * 5000}})
    assert response.status_code == 413
    assert response.json()["code"] == "too_large"


async def test_json_body_over_the_limit_without_content_length_is_413(client: httpx.AsyncClient) -> None:
    async def body() -> Any:
        for _ in range(10):
            yield b" " * 1000

    response = await client.post("/v1/uploads", content=body(), headers={"Content-Type": "application/json"})
    assert response.status_code == 413


async def test_malformed_json_is_400(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/uploads", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"

"""Every limit is configurable and answers with its own error code."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from blobstore.api import create_app
from blobstore.runtime import open_service
from blobstore.service import ArtifactService
from mcp_resources.transports.http import McpHttpExtension
from tests.fixtures.problems import problem
from tests.fixtures.settings import make_settings
from tests.security.conftest import BASE, McpConnect, Tenant, issue, running

LIMITS: dict[str, Any] = {
    "max_artifact_size": 8192,
    "max_chunks_per_upload": 5,
    "max_open_uploads": 2,
    "namespace_quota_bytes": 12_000,
    "max_json_body": 512,
    "max_ranges": 3,
    "mcp_window_max": 2048,
    "mcp_chunk_max": 1024,
    "default_chunk_size": 1024,
    "max_chunk_size": 2048,
}


@pytest.fixture
async def limited(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, ArtifactService, FastAPI]]:
    settings = make_settings(tmp_path, **LIMITS)
    async with open_service(settings) as service:
        app = create_app(settings, service=service, extensions=[McpHttpExtension(settings)])
        async with (
            running(app),
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http,
        ):
            yield http, service, app


@pytest.fixture
def http(limited: tuple[httpx.AsyncClient, ArtifactService, FastAPI]) -> httpx.AsyncClient:
    return limited[0]


@pytest.fixture
def service(limited: tuple[httpx.AsyncClient, ArtifactService, FastAPI]) -> ArtifactService:
    return limited[1]


@pytest.fixture
def app(limited: tuple[httpx.AsyncClient, ArtifactService, FastAPI]) -> FastAPI:
    return limited[2]


@pytest.fixture
async def me(service: ArtifactService) -> Tenant:
    return await issue(service, "me")


async def streamed(data: bytes, piece: int = 1000) -> AsyncIterator[bytes]:
    """A body without Content-Length (chunked transfer encoding)."""
    for start in range(0, len(data), piece):
        yield data[start : start + piece]


def pieces(data: bytes, piece: int = 1000) -> Iterator[bytes]:
    for start in range(0, len(data), piece):
        yield data[start : start + piece]


# -- artifact size -----------------------------------------------------------------------------------------


async def test_an_artifact_over_the_maximum_size_is_too_large(http: httpx.AsyncClient, me: Tenant) -> None:
    declared = await http.post(
        "/v1/artifacts", params={"name": "big"}, content=b"x" * 8193, headers=me.headers
    )
    body = problem(declared, 413, "too_large")
    assert body["max_size"] == 8192
    undeclared = await http.post(
        "/v1/artifacts", params={"name": "big"}, content=streamed(b"x" * 9000), headers=me.headers
    )
    problem(undeclared, 413, "too_large")
    exact = await http.post("/v1/artifacts", params={"name": "ok"}, content=b"x" * 8192, headers=me.headers)
    assert exact.status_code == 201


async def test_a_chunked_upload_over_the_maximum_size_is_too_large(
    http: httpx.AsyncClient, me: Tenant
) -> None:
    problem(
        await http.post("/v1/uploads", json={"name": "b", "size": 8193}, headers=me.headers), 413, "too_large"
    )
    begun = await http.post("/v1/uploads", json={"name": "b", "chunk_size": 2048}, headers=me.headers)
    upload_id = begun.json()["upload_id"]
    # Undeclared size: chunk 4 would start at byte 8192, the first byte past the maximum.
    late = await http.put(f"/v1/uploads/{upload_id}/chunks/4", content=b"x" * 16, headers=me.headers)
    problem(late, 413, "too_large")


# -- chunk size and count ---------------------------------------------------------------------------------


async def test_a_chunk_longer_than_the_chunk_size_is_refused(http: httpx.AsyncClient, me: Tenant) -> None:
    begun = await http.post("/v1/uploads", json={"name": "c", "chunk_size": 1024}, headers=me.headers)
    upload_id = begun.json()["upload_id"]
    declared = await http.put(f"/v1/uploads/{upload_id}/chunks/0", content=b"x" * 1025, headers=me.headers)
    problem(declared, 422, "chunk_size_invalid")
    undeclared = await http.put(
        f"/v1/uploads/{upload_id}/chunks/0", content=streamed(b"x" * 1500, 500), headers=me.headers
    )
    problem(undeclared, 422, "chunk_size_invalid")
    status = await http.get(f"/v1/uploads/{upload_id}", headers=me.headers)
    assert status.json()["chunks_received"] == []


@pytest.mark.parametrize("chunk_size", [8, 4096])
async def test_a_chunk_size_outside_the_configured_range_is_refused(
    http: httpx.AsyncClient, me: Tenant, chunk_size: int
) -> None:
    response = await http.post(
        "/v1/uploads", json={"name": "c", "chunk_size": chunk_size}, headers=me.headers
    )
    body = problem(response, 400, "invalid_request")
    assert "chunk_size" in body["detail"]


async def test_more_chunks_than_allowed_per_upload_are_refused(http: httpx.AsyncClient, me: Tenant) -> None:
    declared = await http.post(
        "/v1/uploads", json={"name": "n", "size": 6 * 1024, "chunk_size": 1024}, headers=me.headers
    )
    problem(declared, 413, "limit_exceeded")
    begun = await http.post("/v1/uploads", json={"name": "n", "chunk_size": 1024}, headers=me.headers)
    upload_id = begun.json()["upload_id"]
    sixth = await http.put(f"/v1/uploads/{upload_id}/chunks/5", content=b"x" * 16, headers=me.headers)
    problem(sixth, 422, "chunk_index_out_of_range")


# -- open uploads and quota ------------------------------------------------------------------------------


async def test_open_uploads_are_limited_per_namespace(
    http: httpx.AsyncClient, service: ArtifactService, me: Tenant
) -> None:
    other = await issue(service, "other")
    first = [await http.post("/v1/uploads", json={"name": f"u{i}"}, headers=me.headers) for i in range(2)]
    assert [r.status_code for r in first] == [201, 201]
    problem(await http.post("/v1/uploads", json={"name": "u3"}, headers=me.headers), 429, "too_many_uploads")
    assert (await http.post("/v1/uploads", json={"name": "x"}, headers=other.headers)).status_code == 201
    # Aborting one frees its place.
    await http.delete(f"/v1/uploads/{first[0].json()['upload_id']}", headers=me.headers)
    assert (await http.post("/v1/uploads", json={"name": "u4"}, headers=me.headers)).status_code == 201


async def test_the_namespace_quota_counts_what_the_namespace_references(
    http: httpx.AsyncClient, service: ArtifactService, me: Tenant
) -> None:
    other = await issue(service, "other")
    data = b"q" * 5000
    for _ in range(2):  # the same content twice: dedup does not discount the namespace's usage
        assert (
            await http.post("/v1/artifacts", params={"name": "q"}, content=data, headers=me.headers)
        ).status_code == 201
    body = problem(
        await http.post("/v1/artifacts", params={"name": "q"}, content=data, headers=me.headers),
        413,
        "quota_exceeded",
    )
    assert body["quota"] == 12_000
    problem(
        await http.post("/v1/artifacts", params={"name": "q"}, content=streamed(data), headers=me.headers),
        413,
        "quota_exceeded",
    )
    problem(
        await http.post("/v1/uploads", json={"name": "q", "size": 5000}, headers=me.headers),
        413,
        "quota_exceeded",
    )
    # Another namespace has its own quota.
    assert (
        await http.post("/v1/artifacts", params={"name": "q"}, content=data, headers=other.headers)
    ).status_code == 201
    # Freeing space makes room again.
    first = (await http.get("/v1/artifacts", headers=me.headers)).json()["items"][0]["id"]
    await http.delete(f"/v1/artifacts/{first}", headers=me.headers)
    assert (
        await http.post("/v1/artifacts", params={"name": "q"}, content=data, headers=me.headers)
    ).status_code == 201


async def test_an_undeclared_chunked_upload_stops_at_the_quota(http: httpx.AsyncClient, me: Tenant) -> None:
    await http.post("/v1/artifacts", params={"name": "fill"}, content=b"f" * 8000, headers=me.headers)
    begun = await http.post("/v1/uploads", json={"name": "u", "chunk_size": 2048}, headers=me.headers)
    upload_id = begun.json()["upload_id"]
    for index in range(2):
        ok = await http.put(
            f"/v1/uploads/{upload_id}/chunks/{index}", content=b"u" * 2048, headers=me.headers
        )
        assert ok.status_code == 200
    past = await http.put(f"/v1/uploads/{upload_id}/chunks/2", content=b"u" * 2048, headers=me.headers)
    problem(past, 413, "quota_exceeded")
    done = await http.post(f"/v1/uploads/{upload_id}/complete", json={}, headers=me.headers)
    problem(done, 413, "quota_exceeded")


# -- request bodies and ranges ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/uploads"),
        ("PATCH", "/v1/artifacts/{artifact}"),
        ("POST", "/v1/uploads/{upload}/complete"),
    ],
)
async def test_json_bodies_over_the_limit_are_too_large(
    http: httpx.AsyncClient, me: Tenant, method: str, path: str
) -> None:
    stored = await http.post("/v1/artifacts", params={"name": "a"}, content=b"a", headers=me.headers)
    begun = await http.post("/v1/uploads", json={"name": "u"}, headers=me.headers)
    target = path.format(artifact=stored.json()["id"], upload=begun.json()["upload_id"])
    big = b'{"name": "' + b"n" * 600 + b'"}'
    headers = {**me.headers, "Content-Type": "application/json"}
    problem(await http.request(method, target, content=big, headers=headers), 413, "too_large")
    problem(await http.request(method, target, content=streamed(big, 100), headers=headers), 413, "too_large")


async def test_any_body_past_the_global_cap_is_refused_before_the_app_reads_it(
    http: httpx.AsyncClient, me: Tenant
) -> None:
    cap = LIMITS["max_artifact_size"] + 1024 * 1024
    response = await http.get("/v1/artifacts", headers={**me.headers, "Content-Length": str(cap + 1)})
    problem(response, 413, "too_large")


async def test_too_many_ranges_in_one_request_are_refused(http: httpx.AsyncClient, me: Tenant) -> None:
    stored = await http.post(
        "/v1/artifacts", params={"name": "r"}, content=bytes(range(256)) * 4, headers=me.headers
    )
    url = f"/v1/artifacts/{stored.json()['id']}/content"
    ok = await http.get(url, headers={**me.headers, "Range": "bytes=0-0,10-10,20-20"})
    assert ok.status_code == 206
    refused = await http.get(url, headers={**me.headers, "Range": "bytes=0-0,10-10,20-20,30-30"})
    body = problem(refused, 416, "too_many_ranges")
    assert body["max_ranges"] == 3


# -- MCP ---------------------------------------------------------------------------------------------------


async def test_mcp_windows_are_clamped_to_the_window_maximum(
    http: httpx.AsyncClient, me: Tenant, mcp_as: McpConnect
) -> None:
    data = bytes(range(256)) * 24  # 6144 bytes
    stored = await http.post("/v1/artifacts", params={"name": "w.bin"}, content=data, headers=me.headers)
    uri = f"blobstore://artifacts/{stored.json()['id']}?offset=100&length=5000"
    async with mcp_as(me) as client:
        read = await client.read_resource(uri)
    contents = read.contents[0]
    window = (contents.meta or {})["dev.blobstore/window"]
    assert (window["offset"], window["length"]) == (100, 2048)
    assert base64.b64decode(contents.blob) == data[100:2148]  # type: ignore[union-attr]


async def test_mcp_chunks_over_the_mcp_chunk_maximum_are_refused(me: Tenant, mcp_as: McpConnect) -> None:
    async with mcp_as(me) as client:
        begun = await client.call_tool("upload_begin", {"name": "m.bin", "chunk_size": 1024})
        assert begun.structured_content is not None
        upload_id = begun.structured_content["upload_id"]
        sent = await client.call_tool(
            "upload_chunk",
            {"upload_id": upload_id, "index": 0, "data": base64.b64encode(b"m" * 1025).decode()},
        )
    assert sent.is_error
    assert sent.structured_content is not None
    assert sent.structured_content["error"]["code"] == "limit_exceeded"
    assert sent.structured_content["error"]["maxChunk"] == 1024

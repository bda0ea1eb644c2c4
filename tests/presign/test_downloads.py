"""Downloads answered with a redirect to a presigned S3 URL (``BLOBSTORE_S3_PRESIGN_DOWNLOADS``)."""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path

import anyio
import httpx
import pytest
from fastapi import FastAPI

from blobstore.client import AsyncBlobstoreClient
from tests.fixtures.asgi import app_client
from tests.fixtures.peers import peer_missing
from tests.presign.conftest import MiB, S3Place, presign_settings

pytestmark = pytest.mark.s3


async def store(api: httpx.AsyncClient, data: bytes, name: str = "report 2026.pdf") -> str:
    response = await api.post(
        "/v1/artifacts", params={"name": name, "mime_type": "application/pdf"}, content=data
    )
    assert response.status_code == 201, response.text
    artifact_id: str = response.json()["id"]
    return artifact_id


async def test_a_download_redirects_to_a_presigned_url_with_the_exact_bytes_and_headers(
    api: httpx.AsyncClient, storage_http: httpx.AsyncClient
) -> None:
    data = b"%PDF-1.7\n" + os.urandom(3 * MiB + 17)
    artifact_id = await store(api, data)
    redirect = await api.get(f"/v1/artifacts/{artifact_id}/content")
    assert redirect.status_code == 307
    assert redirect.headers["cache-control"] == "no-store"
    assert redirect.content == b""
    served = await storage_http.get(redirect.headers["location"])
    assert served.status_code == 200
    assert served.content == data
    assert served.headers["content-type"] == "application/pdf"
    # What the API itself sends for the same download (HEAD stays on the API).
    head = await api.head(f"/v1/artifacts/{artifact_id}/content")
    assert served.headers["content-disposition"] == head.headers["content-disposition"]
    assert "filename*=UTF-8''report%202026.pdf" in served.headers["content-disposition"]


async def test_a_range_follows_the_redirect_and_the_storage_answers_it(
    api: httpx.AsyncClient, storage_http: httpx.AsyncClient
) -> None:
    data = os.urandom(2 * MiB)
    artifact_id = await store(api, data)
    headers = {"Range": "bytes=1000-1048575"}
    redirect = await api.get(f"/v1/artifacts/{artifact_id}/content", headers=headers)
    assert redirect.status_code == 307
    served = await storage_http.get(redirect.headers["location"], headers=headers)
    assert served.status_code == 206
    assert served.content == data[1000:1048576]


async def test_curl_following_the_redirect_gets_the_exact_bytes(
    api: httpx.AsyncClient, tmp_path: Path
) -> None:
    curl = shutil.which("curl")
    if curl is None:
        peer_missing("curl is not installed")
    data = os.urandom(MiB + 5)
    artifact_id = await store(api, data)
    redirect = await api.get(f"/v1/artifacts/{artifact_id}/content")
    target = tmp_path / "out.bin"
    await anyio.run_process([curl, "-sSf", "-o", str(target), redirect.headers["location"]])
    assert target.read_bytes() == data


@pytest.mark.parametrize(
    "headers",
    [
        {"If-Modified-Since": "Thu, 01 Jan 2015 00:00:00 GMT"},
        {"If-None-Match": '"sha256-0000"'},
        {"Range": "bytes=0-0,-1"},
        {"Range": "bytes=0-9", "If-Range": '"sha256-0000"'},
    ],
    ids=["if-modified-since", "if-none-match", "two-ranges", "failed-if-range"],
)
async def test_requests_the_storage_would_judge_differently_stay_on_the_api(
    api: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    data = os.urandom(4096)
    artifact_id = await store(api, data)
    response = await api.get(f"/v1/artifacts/{artifact_id}/content", headers=headers)
    assert response.status_code in (200, 206)
    assert "location" not in response.headers


async def test_head_windows_and_not_modified_stay_on_the_api(api: httpx.AsyncClient) -> None:
    data = os.urandom(4096)
    artifact_id = await store(api, data)
    url = f"/v1/artifacts/{artifact_id}/content"
    head = await api.head(url)
    assert head.status_code == 200
    assert head.headers["content-length"] == str(len(data))
    window = await api.get(url, params={"offset": "10", "length": "20"})
    assert window.status_code == 206
    assert window.content == data[10:30]
    etag = head.headers["etag"]
    assert (await api.get(url, headers={"If-None-Match": etag})).status_code == 304


async def test_the_redirect_needs_the_same_authorisation_as_a_download(api: httpx.AsyncClient) -> None:
    response = await api.get("/v1/artifacts/a_doesnotexist0000000000/content")
    assert response.status_code == 404
    assert "location" not in response.headers


async def test_the_client_follows_the_redirect_and_verifies_the_whole_download(
    api: httpx.AsyncClient, blob_client: AsyncBlobstoreClient, tmp_path: Path
) -> None:
    data = os.urandom(3 * MiB + 1)
    artifact_id = await store(api, data, name="whole.bin")
    result = await blob_client.download(artifact_id, tmp_path / "whole.bin")
    assert result.verified
    assert (tmp_path / "whole.bin").read_bytes() == data
    part = await blob_client.download(artifact_id, tmp_path / "part.bin", range=(MiB, 2 * MiB + 3))
    assert (tmp_path / "part.bin").read_bytes() == data[MiB : 2 * MiB + 3]
    assert hashlib.sha256((tmp_path / "whole.bin").read_bytes()).hexdigest() == result.artifact.sha256
    assert part.end - part.start == MiB + 3


class _TokenStripping(httpx.AsyncBaseTransport):
    """In front of the in-process app, which runs without tokens: the client's token stops here."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        assert request.headers["authorization"] == "Bearer secret-token"
        del request.headers["authorization"]
        return await self.inner.handle_async_request(request)


async def test_the_client_sends_its_token_to_the_api_and_never_to_the_storage(
    api: httpx.AsyncClient, app: FastAPI, tmp_path: Path
) -> None:
    sent: list[httpx.Request] = []

    async def record(request: httpx.Request) -> None:
        sent.append(request)

    artifact_id = await store(api, os.urandom(1000), name="t.bin")
    transport = _TokenStripping(httpx.ASGITransport(app=app))
    async with AsyncBlobstoreClient("http://127.0.0.1", token="secret-token", transport=transport) as client:
        client._direct_http.event_hooks["request"].append(record)
        await client.download(artifact_id, tmp_path / "t.bin")
    assert sent, "the download did not go to the storage"
    assert all("authorization" not in request.headers for request in sent)


async def test_a_presigned_download_url_expires(
    tmp_path: Path, s3_place: S3Place, storage_http: httpx.AsyncClient
) -> None:
    from blobstore.api import create_app

    settings = presign_settings(tmp_path, s3_place, s3_presign_seconds=1)
    app = create_app(settings)
    async with app_client(app) as api:
        artifact_id = await store(api, b"short-lived")
        location = (await api.get(f"/v1/artifacts/{artifact_id}/content")).headers["location"]
        assert httpx.URL(location).params["X-Amz-Expires"] == "1"
        assert (await storage_http.get(location)).status_code == 200
        if s3_place.name == "s3":
            pytest.skip("moto does not enforce the expiry of presigned URLs (the lifetime is checked above)")
        deadline = time.monotonic() + 30
        status = 200
        while status == 200 and time.monotonic() < deadline:
            await anyio.sleep(0.25)
            status = (await storage_http.get(location)).status_code
        assert status == 403

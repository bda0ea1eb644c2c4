"""Single-request uploads (multipart and raw), and artifact list / get / patch / delete."""

from __future__ import annotations

import hashlib
import io
import os
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from PIL import Image

from blobstore.api.multipart import StreamingForm
from blobstore.errors import InvalidRequest
from blobstore.metadata.tables import artifacts
from blobstore.service import ArtifactService
from tests.api.conftest import Uploader


def png_bytes(width: int = 7, height: int = 3) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), "red").save(buffer, format="PNG")
    return buffer.getvalue()


async def test_multipart_upload_takes_name_type_and_ttl_from_fields(client: httpx.AsyncClient) -> None:
    data = os.urandom(5000)
    response = await client.post(
        "/v1/artifacts",
        data={"name": "report.bin", "mime_type": "application/x-report", "ttl_seconds": "60"},
        files={"file": ("ignored.dat", data, "application/octet-stream")},
    )
    assert response.status_code == 201, response.text
    artifact = response.json()
    assert artifact["name"] == "report.bin"
    assert artifact["mime_type"] == "application/x-report"
    assert artifact["sha256"] == hashlib.sha256(data).hexdigest()
    assert response.headers["location"] == f"/v1/artifacts/{artifact['id']}"
    content = await client.get(f"/v1/artifacts/{artifact['id']}/content")
    assert content.content == data


async def test_multipart_upload_defaults_the_name_to_the_filename_and_sniffs_the_type(
    client: httpx.AsyncClient,
) -> None:
    response = await client.post(
        "/v1/artifacts", files={"file": ("pic.png", png_bytes(), "application/octet-stream")}
    )
    assert response.status_code == 201
    artifact = response.json()
    assert artifact["name"] == "pic.png"
    assert artifact["mime_type"] == "image/png"
    assert artifact["media"] == {"width": 7, "height": 3, "format": "png"}
    assert artifact["resource_link"]["description"] == "pic.png (image/png, 75 bytes, 7x3 px)"


async def test_a_file_claiming_png_that_is_not_one_is_stored_as_what_it_is(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/artifacts",
        params={"name": "fake.png", "mime_type": "image/png"},
        content=b"plain text, not a png",
    )
    assert response.status_code == 201
    artifact = response.json()
    assert artifact["mime_type"] == "text/plain"
    assert artifact["media"] == {}


async def test_raw_body_upload_checks_content_digest(client: httpx.AsyncClient) -> None:
    import base64

    data = b"abc" * 100
    good = base64.b64encode(hashlib.sha256(data).digest()).decode()
    ok = await client.post(
        "/v1/artifacts", params={"name": "a"}, content=data, headers={"Content-Digest": f"sha-256=:{good}:"}
    )
    assert ok.status_code == 201
    bad = base64.b64encode(hashlib.sha256(b"other").digest()).decode()
    refused = await client.post(
        "/v1/artifacts", params={"name": "a"}, content=data, headers={"Content-Digest": f"sha-256=:{bad}:"}
    )
    assert refused.status_code == 422
    assert refused.json()["code"] == "digest_mismatch"


async def test_raw_body_upload_checks_the_sha256_parameter(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/artifacts", params={"name": "a", "sha256": "0" * 64}, content=b"data")
    assert response.status_code == 422
    assert response.json()["code"] == "digest_mismatch"


async def test_raw_body_upload_without_a_name_is_named_upload_as_in_tus(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/artifacts", content=b"data")
    assert response.status_code == 201, response.text
    assert response.json()["name"] == "upload"


async def test_raw_body_is_streamed_to_storage_not_buffered(client: httpx.AsyncClient) -> None:
    pieces = [os.urandom(1000) for _ in range(20)]

    async def body() -> Any:
        for piece in pieces:
            yield piece

    response = await client.post("/v1/artifacts", params={"name": "s.bin"}, content=body())
    assert response.status_code == 201
    assert response.json()["size"] == 20_000


async def test_too_large_single_upload_is_413(client: httpx.AsyncClient, settings: Any) -> None:
    settings.max_artifact_size = 1000
    response = await client.post("/v1/artifacts", params={"name": "big"}, content=os.urandom(2000))
    assert response.status_code == 413
    assert response.json()["code"] == "too_large"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'--B\r\nContent-Disposition: form-data; name="name"\r\n\r\nx\r\n--B--\r\n', "no 'file' part"),
        (
            b'--B\r\nContent-Disposition: form-data; name="file"; filename="f"\r\n\r\nabc\r\n'
            b'--B\r\nContent-Disposition: form-data; name="name"\r\n\r\nlate\r\n--B--\r\n',
            "must come before",
        ),
        (b'--B\r\nContent-Disposition: form-data; name="file"; filename="f"\r\n\r\nabc', "ended"),
        (
            b'--B\r\nContent-Disposition: form-data; name="relativePath"\r\n\r\nx\r\n'
            b'--B\r\nContent-Disposition: form-data; name="file"; filename="f"\r\n\r\nabc\r\n--B--\r\n',
            "unknown form field",
        ),
    ],
)
async def test_malformed_forms_are_400_and_store_nothing(
    client: httpx.AsyncClient, body: bytes, message: str
) -> None:
    response = await client.post(
        "/v1/artifacts", content=body, headers={"Content-Type": "multipart/form-data; boundary=B"}
    )
    assert response.status_code == 400
    assert message in response.json()["detail"]
    assert (await client.get("/v1/artifacts")).json()["items"] == []


async def test_streaming_form_yields_file_bytes_before_the_body_ends() -> None:
    head = b'--B\r\nContent-Disposition: form-data; name="file"; filename="f"\r\n\r\n' + b"x" * 5000
    sent: list[str] = []

    async def stream() -> Any:
        sent.append("head")
        yield head
        sent.append("tail")
        yield b"\r\n--B--\r\n"

    form = StreamingForm(stream(), b"B")
    part = await form.until_file()
    assert part.filename == "f"
    data = form.file_data()
    first = await anext(data)
    assert sent == ["head"]  # the first bytes are handed on while the rest is still unread
    rest = b"".join([piece async for piece in data])
    assert first + rest == b"x" * 5000


async def test_streaming_form_refuses_oversized_fields() -> None:
    async def stream() -> Any:
        yield b'--B\r\nContent-Disposition: form-data; name="name"\r\n\r\n' + b"n" * 70_000 + b"\r\n--B--\r\n"

    with pytest.raises(InvalidRequest):
        await StreamingForm(stream(), b"B").until_file()


# -- list / get / patch / delete ----------------------------------------------------------------------------


async def test_get_returns_the_artifact_json_with_a_resource_link(
    client: httpx.AsyncClient, upload: Uploader
) -> None:
    stored = await upload(b"hello", name="hello.txt")
    response = await client.get(f"/v1/artifacts/{stored['id']}")
    assert response.status_code == 200
    artifact = response.json()
    assert set(artifact) >= {
        "id",
        "uri",
        "name",
        "mime_type",
        "size",
        "sha256",
        "created_at",
        "expires_at",
        "metadata",
        "media",
        "resource_link",
        "pinned",
        "content_url",
    }
    assert artifact["content_url"] == f"http://127.0.0.1/v1/artifacts/{stored['id']}/content"
    assert artifact["resource_link"] == {
        "type": "resource_link",
        "uri": f"blobstore://artifacts/{stored['id']}",
        "name": "hello.txt",
        "title": "hello.txt",
        "mimeType": "text/plain",
        "size": 5,
        "description": "hello.txt (text/plain, 5 bytes)",
        "annotations": {"lastModified": stored["resource_link"]["annotations"]["lastModified"]},
        "_meta": {
            "dev.blobstore/artifact": {
                "sha256": stored["sha256"],
                "rangeTemplate": f"blobstore://artifacts/{stored['id']}{{?offset,length}}",
                "maxWindow": 1024 * 1024,
            }
        },
    }


async def test_list_pages_with_a_keyset_cursor(client: httpx.AsyncClient, upload: Uploader) -> None:
    ids = {(await upload(f"item {i}".encode(), name=f"{i}.txt"))["id"] for i in range(5)}
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 2}
        if cursor:
            params["cursor"] = cursor
        page = (await client.get("/v1/artifacts", params=params)).json()
        assert len(page["items"]) <= 2
        seen.extend(item["id"] for item in page["items"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(ids)
    assert len(seen) == len(set(seen))


async def test_list_is_newest_first_across_pages_with_ties_broken_by_id(
    client: httpx.AsyncClient, upload: Uploader, service: ArtifactService
) -> None:
    ids = [(await upload(f"item {i}".encode(), name=f"{i}.txt"))["id"] for i in range(7)]
    # Creation times with ties (three at t0, one at t0+1s, three at t0+2s), set in the database directly.
    t0 = datetime.now(UTC).replace(microsecond=0)
    created = [t0] * 3 + [t0 + timedelta(seconds=1)] + [t0 + timedelta(seconds=2)] * 3
    async with service.repo.engine.begin() as conn:
        for artifact_id, at in zip(ids, created, strict=True):
            await conn.execute(
                sa.update(artifacts).where(artifacts.c.id == artifact_id).values(created_at=at)
            )
    expected = [artifact_id for _, artifact_id in sorted(zip(created, ids, strict=True), reverse=True)]

    for limit in (1, 2, 3, 100):
        seen: list[str] = []
        cursor = None
        while True:
            params: dict[str, Any] = {"limit": limit}
            if cursor:
                params["cursor"] = cursor
            page = (await client.get("/v1/artifacts", params=params)).json()
            assert len(page["items"]) <= limit
            seen.extend(item["id"] for item in page["items"])
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert seen == expected, limit


@pytest.mark.parametrize("params", [{"limit": 0}, {"limit": 1001}, {"cursor": "!!!"}])
async def test_bad_list_parameters_are_400(client: httpx.AsyncClient, params: dict[str, Any]) -> None:
    response = await client.get("/v1/artifacts", params=params)
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"


async def test_patch_pins_and_sets_the_ttl(client: httpx.AsyncClient, upload: Uploader) -> None:
    stored = await upload(b"x")
    url = f"/v1/artifacts/{stored['id']}"
    pinned = await client.patch(url, json={"pinned": True})
    assert pinned.status_code == 200
    assert pinned.json()["pinned"] is True
    assert pinned.json()["expires_at"] == stored["expires_at"]  # untouched: not in the body
    forever = await client.patch(url, json={"ttl_seconds": None})
    assert forever.json()["expires_at"] is None
    assert forever.json()["pinned"] is True
    later = await client.patch(url, json={"ttl_seconds": 3600})
    assert later.json()["expires_at"] is not None


@pytest.mark.parametrize("body", [{"pinned": None}, {"ttl_seconds": 0}, {"color": "red"}])
async def test_invalid_patches_are_400(
    client: httpx.AsyncClient, upload: Uploader, body: dict[str, Any]
) -> None:
    stored = await upload(b"x")
    response = await client.patch(f"/v1/artifacts/{stored['id']}", json=body)
    assert response.status_code == 400


async def test_delete_removes_the_artifact(client: httpx.AsyncClient, upload: Uploader) -> None:
    stored = await upload(b"x")
    assert (await client.delete(f"/v1/artifacts/{stored['id']}")).status_code == 204
    assert (await client.get(f"/v1/artifacts/{stored['id']}")).status_code == 404
    assert (await client.get(f"/v1/artifacts/{stored['id']}/content")).status_code == 404
    assert (await client.delete(f"/v1/artifacts/{stored['id']}")).status_code == 404

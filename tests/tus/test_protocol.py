"""tus 1.0.0 at /tus/ spoken by hand over httpx: core, creation, checksum, termination, expiration."""

from __future__ import annotations

import base64
import hashlib
import os
from datetime import timedelta

import httpx

from blobstore.api.headers import http_date, parse_http_date
from blobstore.api.tus_headers import parse_metadata
from blobstore.auth import create_token
from blobstore.models import Caller, Scope
from blobstore.service import ArtifactService
from tests.tus.conftest import OFFSET_STREAM, TUS, KiB, MiB, create, head, metadata, patch

# Odd sizes: one byte, 777 KiB, 3.3 MiB, then the rest; none lines up with the 1 MiB staged chunks.
SIZES = [1, 777 * KiB, int(3.3 * MiB), 1234567]
DATA = os.urandom(sum(SIZES))


def checksum(algorithm: str, data: bytes) -> str:
    return f"{algorithm} {base64.b64encode(hashlib.new(algorithm, data).digest()).decode()}"


async def test_options_advertises_version_extensions_max_size_and_checksums_without_auth(
    client: httpx.AsyncClient,
) -> None:
    response = await client.options("/tus/")

    assert response.status_code == 204
    assert response.headers["tus-version"] == "1.0.0"
    assert set(response.headers["tus-extension"].split(",")) == {
        "creation",
        "creation-with-upload",
        "expiration",
        "checksum",
        "termination",
    }
    assert int(response.headers["tus-max-size"]) == 5 * 1024**3
    assert {"sha1", "sha256"} <= set(response.headers["tus-checksum-algorithm"].split(","))


async def test_creation_answers_201_with_location_offset_and_expiry(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/tus/",
        headers={
            **TUS,
            "Upload-Length": "10",
            "Upload-Metadata": metadata(filename="a.txt", filetype="text/plain"),
        },
    )

    assert response.status_code == 201, response.text
    assert response.headers["location"].startswith("/tus/u_")
    assert response.headers["upload-offset"] == "0"
    assert response.headers["tus-resumable"] == "1.0.0"
    assert parse_http_date(response.headers["upload-expires"]) is not None


async def test_head_reports_offset_length_metadata_and_no_store(client: httpx.AsyncClient) -> None:
    location = await create(
        client,
        10,
        **{"Upload-Metadata": metadata(filename="report.pdf", filetype="application/pdf", lang="de")},
    )

    response = await head(client, location)

    assert response.status_code == 200
    assert response.headers["upload-offset"] == "0"
    assert response.headers["upload-length"] == "10"
    assert response.headers["cache-control"] == "no-store"
    echoed = parse_metadata(response.headers["upload-metadata"])
    assert echoed["filename"] == b"report.pdf"
    assert echoed["filetype"] == b"application/pdf"
    assert echoed["lang"] == b"de"


async def test_patches_of_odd_sizes_complete_into_an_artifact_with_identical_bytes(
    client: httpx.AsyncClient, service: ArtifactService
) -> None:
    sha = hashlib.sha256(DATA).hexdigest()
    location = await create(
        client, len(DATA), **{"Upload-Metadata": metadata(filename="odd.bin", sha256=sha)}
    )
    upload_id = location.rsplit("/", 1)[1]
    offset = 0
    for size in SIZES:
        response = await patch(client, location, offset, DATA[offset : offset + size])
        assert response.status_code == 204, response.text
        offset += size
        assert response.headers["upload-offset"] == str(offset)
        if offset < len(DATA):
            assert "blobstore-artifact-id" not in response.headers
            assert (await head(client, location)).headers["upload-offset"] == str(offset)
        if offset == 1 + 777 * KiB + int(3.3 * MiB):
            # Staged chunks are whole MiBs; the rest waits as the tail.
            chunks = await service.repo.list_chunks(upload_id)
            tail = await service.repo.get_tail(upload_id)
            assert [c.size for c in chunks] == [MiB] * 4
            assert tail is not None
            assert (tail.offset, len(tail.data)) == (4 * MiB, offset - 4 * MiB)

    artifact_id = response.headers["blobstore-artifact-id"]
    assert response.headers["link"] == f'<http://127.0.0.1/v1/artifacts/{artifact_id}>; rel="related"'
    content = await client.get(f"/v1/artifacts/{artifact_id}/content")
    assert content.content == DATA
    info = (await client.get(f"/v1/artifacts/{artifact_id}")).json()
    assert info["sha256"] == sha
    assert info["name"] == "odd.bin"
    assert await service.repo.get_tail(upload_id) is None

    finished = await head(client, location)
    assert finished.headers["upload-offset"] == str(len(DATA))
    assert finished.headers["blobstore-artifact-id"] == artifact_id


async def test_one_byte_patches_across_a_chunk_boundary_stay_contiguous(
    client: httpx.AsyncClient, service: ArtifactService
) -> None:
    data = os.urandom(MiB + 3)
    location = await create(client, len(data))
    first = await patch(client, location, 0, data[: MiB - 1])
    assert first.status_code == 204
    for offset in range(MiB - 1, MiB + 3):
        response = await patch(client, location, offset, data[offset : offset + 1])
        assert response.status_code == 204, response.text

    artifact_id = response.headers["blobstore-artifact-id"]
    assert (await client.get(f"/v1/artifacts/{artifact_id}/content")).content == data


async def test_offset_mismatch_is_409_with_the_current_offset_and_changes_nothing(
    client: httpx.AsyncClient,
) -> None:
    location = await create(client, 100)
    assert (await patch(client, location, 0, b"x" * 40)).status_code == 204

    behind = await patch(client, location, 0, b"y" * 10)
    ahead = await patch(client, location, 60, b"y" * 10)

    for response in (behind, ahead):
        assert response.status_code == 409
        assert response.headers["upload-offset"] == "40"
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["code"] == "conflict"
    assert (await head(client, location)).headers["upload-offset"] == "40"


async def test_checksum_mismatch_is_460_and_keeps_nothing(client: httpx.AsyncClient) -> None:
    data = os.urandom(int(1.5 * MiB))
    corrupted = bytes([data[0] ^ 0xFF]) + data[1:]
    location = await create(client, len(data))

    refused = await patch(client, location, 0, corrupted, **{"Upload-Checksum": checksum("sha256", data)})

    assert refused.status_code == 460
    assert refused.json()["code"] == "checksum_mismatch"
    assert (await head(client, location)).headers["upload-offset"] == "0"
    # Had the corrupted first MiB been staged, the right bytes would now conflict with it.
    accepted = await patch(client, location, 0, data, **{"Upload-Checksum": checksum("sha256", data)})
    assert accepted.status_code == 204, accepted.text
    artifact_id = accepted.headers["blobstore-artifact-id"]
    assert (await client.get(f"/v1/artifacts/{artifact_id}/content")).content == data


async def test_sha1_checksums_are_verified_and_unknown_algorithms_are_400(client: httpx.AsyncClient) -> None:
    location = await create(client, 20)

    unknown = await patch(client, location, 0, b"a" * 10, **{"Upload-Checksum": "crc32 AAAAAA=="})
    good = await patch(client, location, 0, b"a" * 10, **{"Upload-Checksum": checksum("sha1", b"a" * 10)})
    bad = await patch(client, location, 10, b"b" * 10, **{"Upload-Checksum": checksum("sha1", b"c" * 10)})

    assert unknown.status_code == 400
    assert good.status_code == 204
    assert good.headers["upload-offset"] == "10"
    assert bad.status_code == 460
    assert (await head(client, location)).headers["upload-offset"] == "10"


async def test_patch_with_another_content_type_is_415(client: httpx.AsyncClient) -> None:
    location = await create(client, 10)

    response = await client.patch(
        location,
        content=b"0123456789",
        headers={**TUS, "Content-Type": "application/octet-stream", "Upload-Offset": "0"},
    )

    assert response.status_code == 415
    assert response.headers["tus-resumable"] == "1.0.0"
    assert (await head(client, location)).headers["upload-offset"] == "0"


async def test_missing_or_other_tus_resumable_is_412_and_not_processed(
    client: httpx.AsyncClient, service: ArtifactService
) -> None:
    missing = await client.post("/tus/", headers={"Upload-Length": "10"})
    other = await client.post("/tus/", headers={"Tus-Resumable": "0.2.2", "Upload-Length": "10"})

    for response in (missing, other):
        assert response.status_code == 412
        assert response.headers["tus-version"] == "1.0.0"
    assert await service.repo.count_open_uploads("default") == 0


async def test_termination_answers_204_then_the_upload_is_gone(client: httpx.AsyncClient) -> None:
    location = await create(client, 10)
    assert (await patch(client, location, 0, b"abc")).status_code == 204

    deleted = await client.delete(location, headers=TUS)

    assert deleted.status_code == 204
    assert (await head(client, location)).status_code == 410
    assert (await patch(client, location, 3, b"def")).status_code == 410


async def test_patch_answers_upload_expires_and_an_expired_upload_is_gone(
    client: httpx.AsyncClient, service: ArtifactService
) -> None:
    location = await create(client, 10)
    session = await service.uploads.get(Caller(namespace="default"), location.rsplit("/", 1)[1])

    response = await patch(client, location, 0, b"abc")
    assert response.headers["upload-expires"] == http_date(session.expires_at)

    real_clock = service.clock.source
    service.clock.source = lambda: real_clock() + timedelta(days=2)
    assert (await head(client, location)).status_code == 410
    late = await patch(client, location, 3, b"def")
    assert late.status_code == 410
    assert late.json()["code"] == "upload_not_open"


async def test_zero_length_upload_is_an_artifact_at_creation(client: httpx.AsyncClient) -> None:
    response = await client.post("/tus/", headers={**TUS, "Upload-Length": "0"})

    assert response.status_code == 201
    assert response.headers["upload-offset"] == "0"
    artifact_id = response.headers["blobstore-artifact-id"]
    assert (await client.get(f"/v1/artifacts/{artifact_id}/content")).content == b""


async def test_creation_with_upload_stores_the_first_body(client: httpx.AsyncClient) -> None:
    data = os.urandom(2 * MiB + 5)
    response = await client.post(
        "/tus/",
        content=data[: MiB + 1],
        headers={**TUS, "Upload-Length": str(len(data)), "Content-Type": OFFSET_STREAM},
    )

    assert response.status_code == 201, response.text
    assert response.headers["upload-offset"] == str(MiB + 1)
    rest = await patch(client, response.headers["location"], MiB + 1, data[MiB + 1 :])
    artifact_id = rest.headers["blobstore-artifact-id"]
    assert (await client.get(f"/v1/artifacts/{artifact_id}/content")).content == data


async def test_method_override_turns_a_post_into_a_patch(client: httpx.AsyncClient) -> None:
    location = await create(client, 4)

    response = await client.post(
        location,
        content=b"abcd",
        headers={
            **TUS,
            "X-HTTP-Method-Override": "PATCH",
            "Content-Type": OFFSET_STREAM,
            "Upload-Offset": "0",
        },
    )

    assert response.status_code == 204
    assert response.headers["upload-offset"] == "4"
    assert "blobstore-artifact-id" in response.headers


async def test_length_above_the_maximum_and_bodies_past_the_length_are_413(client: httpx.AsyncClient) -> None:
    huge = await client.post("/tus/", headers={**TUS, "Upload-Length": str(6 * 1024**3)})
    location = await create(client, 10)
    past = await patch(client, location, 0, b"x" * 11)

    assert huge.status_code == 413
    assert past.status_code == 413
    assert (await head(client, location)).headers["upload-offset"] == "0"


async def test_declared_sha256_that_does_not_match_refuses_completion(client: httpx.AsyncClient) -> None:
    wrong = hashlib.sha256(b"something else").hexdigest()
    location = await create(client, 5, **{"Upload-Metadata": metadata(sha256=wrong)})

    response = await patch(client, location, 0, b"hello")

    assert response.status_code == 422
    assert response.json()["code"] == "digest_mismatch"


async def test_another_namespace_gets_404_for_every_method(
    client: httpx.AsyncClient, service: ArtifactService
) -> None:
    owner = await create_token(service.repo, namespace="alpha", scopes=frozenset({Scope.READ, Scope.WRITE}))
    other = await create_token(service.repo, namespace="beta", scopes=frozenset({Scope.READ, Scope.WRITE}))
    mine = {"Authorization": f"Bearer {owner.token}"}
    theirs = {"Authorization": f"Bearer {other.token}"}
    location = await create(client, 10, **mine)
    assert (await patch(client, location, 0, b"abc", **mine)).status_code == 204

    responses = [
        await head(client, location, **theirs),
        await patch(client, location, 3, b"def", **theirs),
        await client.delete(location, headers={**TUS, **theirs}),
    ]

    assert [r.status_code for r in responses] == [404, 404, 404]
    assert (await head(client, location, **mine)).headers["upload-offset"] == "3"


async def test_a_native_upload_is_not_reachable_over_tus(client: httpx.AsyncClient) -> None:
    begun = await client.post("/v1/uploads", json={"name": "native.bin", "size": 10})
    upload_id = begun.json()["upload_id"]

    assert (await head(client, f"/tus/{upload_id}")).status_code == 404

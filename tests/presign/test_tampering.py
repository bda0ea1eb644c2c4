"""Direct uploads under tampering, on moto and s3rver: parts sent with other bytes or another size than the
upload declared, through an expired URL, a completion with parts missing, a declared SHA-256 the parts do not
hash to. No artifact ever exists with wrong content, each case gets its documented error (docs/http-api.md,
"Direct uploads to S3"), and the upload can be finished or aborted afterwards."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import httpx
import pytest

from blobstore.api import create_app
from blobstore.service import ArtifactService
from blobstore.storage.s3 import S3BlobStore
from tests.fixtures.asgi import app_client
from tests.presign.conftest import S3Place, presign_settings
from tests.presign.test_uploads import PART, begin, put_parts, split

pytestmark = pytest.mark.s3


async def started(api: httpx.AsyncClient, size: int, **extra: Any) -> tuple[bytes, dict[str, Any], str]:
    """``size`` random bytes, the direct upload begun for them, and its id."""
    data = os.urandom(size)
    begun = await begin(api, data, **extra)
    return data, begun, str(begun["upload_id"])


async def nothing_visible(api: httpx.AsyncClient, s3_place: S3Place) -> None:
    assert (await api.get("/v1/artifacts")).json()["items"] == []
    assert s3_place.blob_keys() == []


async def complete(api: httpx.AsyncClient, upload_id: str, sent: list[dict[str, Any]]) -> httpx.Response:
    return await api.post(f"/v1/uploads/{upload_id}/complete", json={"parts": sent})


async def abort_leaves_nothing(api: httpx.AsyncClient, s3_place: S3Place, upload_id: str) -> None:
    aborted = await api.delete(f"/v1/uploads/{upload_id}")
    assert aborted.status_code == 204, aborted.text
    assert (await api.get(f"/v1/uploads/{upload_id}")).status_code == 404  # an aborted upload is gone
    assert s3_place.multipart_uploads() == []
    await nothing_visible(api, s3_place)


async def completes_with(
    api: httpx.AsyncClient, storage_http: httpx.AsyncClient, upload_id: str, data: bytes
) -> None:
    """Fresh URLs, every part sent again as it should be, and the completion gives the artifact."""
    offer = await api.post(f"/v1/uploads/{upload_id}/parts")
    assert offer.status_code == 200, offer.text
    sent = await put_parts(storage_http, offer.json(), split(data, PART))
    completed = await complete(api, upload_id, sent)
    assert completed.status_code == 201, completed.text
    assert completed.json()["sha256"] == hashlib.sha256(data).hexdigest()
    # An offset makes the API answer itself (not redirect to S3), through the XXH3-checked read path.
    content = await api.get(f"/v1/artifacts/{completed.json()['id']}/content", params={"offset": "0"})
    assert content.content
    assert content.content == data[: len(content.content)]


async def test_a_declared_sha256_the_parts_do_not_hash_to_is_a_digest_mismatch_and_the_upload_aborts(
    api: httpx.AsyncClient, storage_http: httpx.AsyncClient, s3_place: S3Place
) -> None:
    data, begun, upload_id = await started(
        api, PART + 500, sha256=hashlib.sha256(b"something else").hexdigest()
    )
    sent = await put_parts(storage_http, begun["direct_parts"], split(data, PART))

    failed = await complete(api, upload_id, sent)

    assert (failed.status_code, failed.json()["code"]) == (422, "digest_mismatch"), failed.text
    await nothing_visible(api, s3_place)
    assert (await api.get(f"/v1/uploads/{upload_id}")).json()["state"] == "open"
    await abort_leaves_nothing(api, s3_place, upload_id)


async def test_a_longer_last_part_is_refused_and_the_upload_aborts(
    api: httpx.AsyncClient, storage_http: httpx.AsyncClient, s3_place: S3Place
) -> None:
    data, begun, upload_id = await started(api, PART + 500)
    first, last = split(data, PART)
    sent = await put_parts(storage_http, begun["direct_parts"], [first, last + b"tail"])

    failed = await complete(api, upload_id, sent)

    # Where the parts can be listed their lengths are checked first; s3rver's are found by the read-back.
    expected = "size_mismatch" if s3_place.name == "s3rver" else "chunk_size_invalid"
    assert (failed.status_code, failed.json()["code"]) == (422, expected), failed.text
    await nothing_visible(api, s3_place)
    await abort_leaves_nothing(api, s3_place, upload_id)


async def test_a_part_replaced_after_its_etag_was_taken_never_becomes_the_artifact(
    api: httpx.AsyncClient, storage_http: httpx.AsyncClient, s3_place: S3Place
) -> None:
    data, begun, upload_id = await started(api, 2 * PART + 300)
    sent = await put_parts(storage_http, begun["direct_parts"], split(data, PART))
    # Someone holding the URL sends part 2 again with other bytes of the same length.
    url = next(part["url"] for part in begun["direct_parts"]["parts"] if part["part_number"] == 2)
    assert (await storage_http.put(url, content=os.urandom(PART))).status_code == 200

    failed = await complete(api, upload_id, sent)

    assert failed.status_code == 422, failed.text
    assert failed.json()["code"] == "digest_mismatch", failed.text
    await nothing_visible(api, s3_place)
    await completes_with(api, storage_http, upload_id, data)


def refuse_list_parts(params: dict[str, Any], model: Any, **_: Any) -> Any:
    """A botocore hook answering ListParts with NotImplemented, as endpoints without it (s3rver) do."""
    if model.name == "ListParts":
        error = {"Error": {"Code": "NotImplemented", "Message": "not implemented"}}
        return SimpleNamespace(status_code=501, headers={}), error
    return None


@pytest.mark.parametrize("listing", [True, False], ids=["parts-listed", "parts-from-etags"])
async def test_a_completion_naming_a_part_never_sent_is_upload_incomplete(
    api: httpx.AsyncClient,
    storage_http: httpx.AsyncClient,
    s3_place: S3Place,
    service: ArtifactService,
    listing: bool,
) -> None:
    if s3_place.name == "s3rver":
        pytest.skip("s3rver exits on a completion naming a part it does not have (S3 answers InvalidPart)")
    assert isinstance(service.blobs, S3BlobStore)
    if not listing:
        service.blobs.client.meta.events.register("before-call.s3.ListParts", refuse_list_parts)
    data, begun, upload_id = await started(api, 2 * PART + 300)
    parts = split(data, PART)
    sent = await put_parts(storage_http, begun["direct_parts"], parts[:2])
    invented = [*sent, {"part_number": 3, "etag": '"' + "0" * 32 + '"'}]

    failed = await complete(api, upload_id, invented)

    assert (failed.status_code, failed.json()["code"]) == (422, "upload_incomplete"), failed.text
    # Listed, the parts say which one is missing; S3's refusal of the completion does not: all are sent again.
    assert failed.json()["missing"] == ([3] if listing else [1, 2, 3])
    await nothing_visible(api, s3_place)
    await completes_with(api, storage_http, upload_id, data)


async def test_a_part_sent_through_an_expired_url_is_refused_by_s3_and_fresh_urls_finish_the_upload(
    tmp_path: Path, s3_place: S3Place, storage_http: httpx.AsyncClient
) -> None:
    settings = presign_settings(tmp_path, s3_place, s3_presign_seconds=1)
    async with app_client(create_app(settings)) as api:
        data, begun, upload_id = await started(api, PART + 100)
        offer = begun["direct_parts"]
        assert all(httpx.URL(part["url"]).params["X-Amz-Expires"] == "1" for part in offer["parts"])
        if s3_place.name == "s3":
            pytest.skip("moto does not enforce the expiry of presigned URLs (the lifetime is checked above)")
        url = offer["parts"][0]["url"]
        first = split(data, PART)[0]
        deadline = time.monotonic() + 30
        status = 200
        while status == 200 and time.monotonic() < deadline:
            await anyio.sleep(0.25)
            status = (await storage_http.put(url, content=first)).status_code
        assert status == 403
        assert (await api.get(f"/v1/uploads/{upload_id}")).json()["state"] == "open"
        await nothing_visible(api, s3_place)
        await completes_with(api, storage_http, upload_id, data)


async def test_a_completion_with_no_parts_is_refused_and_the_upload_can_still_be_aborted(
    api: httpx.AsyncClient, storage_http: httpx.AsyncClient, s3_place: S3Place
) -> None:
    _data, _begun, upload_id = await started(api, PART + 10)

    failed = await complete(api, upload_id, [])

    if s3_place.name == "s3rver":
        # Without ListParts the completion must name every part with its ETag.
        assert (failed.status_code, failed.json()["code"]) == (400, "invalid_request"), failed.text
    else:
        assert (failed.status_code, failed.json()["code"]) == (422, "upload_incomplete"), failed.text
        assert failed.json()["missing"] == [1, 2]
    await nothing_visible(api, s3_place)
    await abort_leaves_nothing(api, s3_place, upload_id)

"""Upstream resources/read results over the inline limit: stored, answered as range_required or a window."""

from __future__ import annotations

import base64
import hashlib

from blobstore.errors import RangeRequired
from mcp_resources.errors import to_mcp_error
from mcp_resources.uris import WINDOW_META_KEY, WINDOW_URI_TEMPLATE
from tests.proxy.offload_fixtures import CALLER, Rig, b64, fake_pdf

UPSTREAM_URI = "file:///exports/big.pdf"


def blob_result(data: bytes, uri: str = UPSTREAM_URI) -> dict[str, object]:
    return {"contents": [{"uri": uri, "mimeType": "application/pdf", "blob": b64(data)}]}


async def test_large_blob_is_stored_and_answered_with_the_stores_range_required_shape(rig: Rig) -> None:
    pdf = fake_pdf(2_000_000)
    answer = await rig.offloader().resource_read(
        uri=UPSTREAM_URI, params={"uri": UPSTREAM_URI}, result=blob_result(pdf)
    )
    assert answer is not None
    error = answer["error"]
    assert error["code"] == -32602
    data = error["data"]
    store_uri = data["uri"]
    assert store_uri.startswith("blobstore://artifacts/")
    assert await rig.bytes_of(store_uri) == pdf
    window = rig.settings.mcp_window_max
    assert data["first"] == f"{store_uri}?offset=0&length={window}"
    assert data["upstreamUri"] == UPSTREAM_URI
    assert data["sha256"] == hashlib.sha256(pdf).hexdigest()
    assert store_uri in error["message"]
    # The same keys as the store's own range_required answer for a whole-artifact read.
    own = to_mcp_error(
        RangeRequired(
            "x",
            size=len(pdf),
            max_window=window,
            inline_limit=rig.settings.inline_limit,
            first=data["first"],
            range_template=WINDOW_URI_TEMPLATE,
        ),
        uri=store_uri,
    )
    assert own.error.data is not None
    assert {k: data[k] for k in own.error.data} == own.error.data


async def test_window_request_is_answered_with_that_window_of_the_stored_copy(rig: Rig) -> None:
    pdf = fake_pdf(2_000_000)
    params = {"uri": UPSTREAM_URI, "_meta": {WINDOW_META_KEY: {"offset": 1_000_000, "length": 4096}}}
    answer = await rig.offloader().resource_read(uri=UPSTREAM_URI, params=params, result=blob_result(pdf))
    assert answer is not None
    (content,) = answer["result"]["contents"]
    assert base64.b64decode(content["blob"]) == pdf[1_000_000:1_004_096]
    meta = content["_meta"][WINDOW_META_KEY]
    assert (meta["offset"], meta["length"], meta["size"]) == (1_000_000, 4096, len(pdf))
    assert meta["next"].endswith("?offset=1004096&length=4096")


async def test_window_past_the_end_is_the_stores_range_error(rig: Rig) -> None:
    pdf = fake_pdf(700_000)
    params = {"uri": UPSTREAM_URI, "_meta": {WINDOW_META_KEY: {"offset": 800_000, "length": 10}}}
    answer = await rig.offloader().resource_read(uri=UPSTREAM_URI, params=params, result=blob_result(pdf))
    assert answer is not None
    assert answer["error"]["code"] == -32602
    assert answer["error"]["data"]["reason"] == "range_not_satisfiable"


async def test_large_text_resource_is_stored_as_text(rig: Rig) -> None:
    text = "héllo wörld\n" * 60_000
    result = {"contents": [{"uri": "notes://log.txt", "mimeType": "text/plain", "text": text}]}
    answer = await rig.offloader().resource_read(uri="notes://log.txt", params={}, result=result)
    assert answer is not None
    store_uri = answer["error"]["data"]["uri"]
    artifact = await rig.service.get_artifact(CALLER, store_uri.rsplit("/", 1)[-1])
    assert artifact.mime_type == "text/plain"
    assert artifact.name == "log.txt"
    assert (await rig.bytes_of(store_uri)).decode() == text


async def test_small_resource_read_is_left_as_sent(rig: Rig) -> None:
    result = {"contents": [{"uri": "x://small", "mimeType": "text/plain", "text": "small"}]}
    assert await rig.offloader().resource_read(uri="x://small", params={}, result=result) is None


async def test_several_large_contents_are_all_stored_and_listed(rig: Rig) -> None:
    one, two = fake_pdf(600_000, seed=1), fake_pdf(700_000, seed=2)
    result = {
        "contents": [
            {"uri": "x://1.pdf", "mimeType": "application/pdf", "blob": b64(one)},
            {"uri": "x://2.pdf", "mimeType": "application/pdf", "blob": b64(two)},
        ]
    }
    answer = await rig.offloader().resource_read(uri="x://dir", params={}, result=result)
    assert answer is not None
    listed = answer["error"]["data"]["stored"]
    assert [entry["uri"] for entry in listed] == ["x://1.pdf", "x://2.pdf"]
    assert [await rig.bytes_of(entry["storeUri"]) for entry in listed] == [one, two]

"""GET/HEAD /v1/artifacts/{id}/content: RFC 9110 ranges, validators, windows, zero-copy full downloads."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blobstore.api import create_app
from blobstore.runtime import open_service
from tests.api.byteranges import boundary_from, parse_byteranges
from tests.api.conftest import Uploader
from tests.fixtures.asgi import app_client
from tests.fixtures.settings import make_settings

SIZE = 10_000
DATA = os.urandom(SIZE)
MAX_WINDOW = 2048  # SMALL_LIMITS["mcp_window_max"]

hypothesis_settings = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture
async def artifact(upload: Uploader) -> dict[str, Any]:
    return await upload(DATA, name="data.bin")


def content_url(artifact: dict[str, Any]) -> str:
    return f"/v1/artifacts/{artifact['id']}/content"


async def test_full_download_returns_the_bytes_with_validators(
    client: httpx.AsyncClient, artifact: dict[str, Any]
) -> None:
    response = await client.get(content_url(artifact))
    assert response.status_code == 200
    assert response.content == DATA
    headers = response.headers
    assert headers["etag"] == f'"sha256-{artifact["sha256"]}"'
    assert headers["accept-ranges"] == "bytes"
    assert headers["content-length"] == str(SIZE)
    assert headers["cache-control"] == "private, max-age=31536000, immutable"
    assert headers["last-modified"].endswith(" GMT")
    assert headers["content-disposition"] == "attachment; filename=\"data.bin\"; filename*=UTF-8''data.bin"
    assert headers["x-content-type-options"] == "nosniff"


# RFC 9110 §14.1.2: every example, on a 10000-byte artifact: (Range, status, expected [start, end) parts).
RFC_EXAMPLES = [
    ("bytes=0-499", [(0, 500)]),
    ("bytes=500-999", [(500, 1000)]),
    ("bytes=-500", [(9500, 10_000)]),
    ("bytes=9500-", [(9500, 10_000)]),
    ("bytes=0-0,-1", [(0, 1), (9999, 10_000)]),
    ("bytes=500-600,601-999", [(500, 1000)]),
    ("bytes=500-700,601-999", [(500, 1000)]),
]


@pytest.mark.parametrize(("range_header", "parts"), RFC_EXAMPLES)
async def test_rfc9110_range_examples(
    client: httpx.AsyncClient, artifact: dict[str, Any], range_header: str, parts: list[tuple[int, int]]
) -> None:
    response = await client.get(content_url(artifact), headers={"Range": range_header})
    assert response.status_code == 206
    if len(parts) == 1:
        (start, end) = parts[0]
        # §15.3.7: a single part carries Content-Range and is never multipart.
        assert response.headers["content-range"] == f"bytes {start}-{end - 1}/{SIZE}"
        assert response.headers["content-type"] == "application/octet-stream"
        assert response.content == DATA[start:end]
        return
    assert "content-range" not in response.headers
    boundary = boundary_from(response.headers["content-type"])
    got = parse_byteranges(response.content, boundary)
    assert int(response.headers["content-length"]) == len(response.content)
    assert [(first, last + 1) for first, last, *_ in got] == parts
    for first, last, size, part_type, data in got:
        assert size == SIZE
        assert part_type == "application/octet-stream"
        assert data == DATA[first : last + 1]


@pytest.mark.parametrize("range_header", ["bytes=10000-", "bytes=20000-30000", "bytes=-0"])
async def test_unsatisfiable_range_is_416_with_the_size(
    client: httpx.AsyncClient, artifact: dict[str, Any], range_header: str
) -> None:
    response = await client.get(content_url(artifact), headers={"Range": range_header})
    assert response.status_code == 416
    assert response.headers["content-range"] == f"bytes */{SIZE}"
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["code"] == "range_not_satisfiable"


@pytest.mark.parametrize("range_header", ["bytes=5-4", "bytes=abc", "bytes", "pages=1-2"])
async def test_malformed_or_foreign_unit_range_is_ignored(
    client: httpx.AsyncClient, artifact: dict[str, Any], range_header: str
) -> None:
    response = await client.get(content_url(artifact), headers={"Range": range_header})
    assert response.status_code == 200
    assert response.content == DATA


async def test_more_ranges_than_the_cap_are_refused(
    client: httpx.AsyncClient, artifact: dict[str, Any]
) -> None:
    many = ",".join(f"{i * 100}-{i * 100 + 10}" for i in range(9))  # cap is 8 after coalescing
    response = await client.get(content_url(artifact), headers={"Range": f"bytes={many}"})
    assert response.status_code == 416
    assert response.json()["code"] == "too_many_ranges"
    assert response.headers["content-range"] == f"bytes */{SIZE}"


async def test_overlapping_ranges_beyond_the_cap_coalesce_and_are_served(
    client: httpx.AsyncClient, artifact: dict[str, Any]
) -> None:
    overlapping = ",".join(f"{i}-{i + 100}" for i in range(50))  # 50 specs, one merged range
    response = await client.get(content_url(artifact), headers={"Range": f"bytes={overlapping}"})
    assert response.status_code == 206
    assert response.headers["content-range"] == f"bytes 0-149/{SIZE}"
    assert response.content == DATA[:150]


async def test_if_range_with_the_etag_serves_the_range(
    client: httpx.AsyncClient, artifact: dict[str, Any]
) -> None:
    etag = f'"sha256-{artifact["sha256"]}"'
    response = await client.get(content_url(artifact), headers={"Range": "bytes=0-9", "If-Range": etag})
    assert response.status_code == 206
    assert response.content == DATA[:10]


@pytest.mark.parametrize(
    "headers",
    [
        {"Range": "bytes=0-9", "If-Range": '"sha256-other"'},
        {"Range": "bytes=0-9", "If-Range": 'W/"sha256-x"'},
        {"Range": "bytes=0-9", "If-Range": "Mon, 01 Jan 2001 00:00:00 GMT"},
        {"If-None-Match": '"sha256-other"'},
    ],
    ids=["if-range-other-tag", "if-range-weak-tag", "if-range-other-date", "if-none-match-other-tag"],
)
async def test_a_condition_that_does_not_hold_sends_the_whole_artifact(
    client: httpx.AsyncClient, artifact: dict[str, Any], headers: dict[str, str]
) -> None:
    response = await client.get(content_url(artifact), headers=headers)
    assert response.status_code == 200
    assert response.content == DATA


async def test_if_range_with_last_modified_serves_the_range(
    client: httpx.AsyncClient, artifact: dict[str, Any]
) -> None:
    last_modified = (await client.head(content_url(artifact))).headers["last-modified"]
    response = await client.get(
        content_url(artifact), headers={"Range": "bytes=-10", "If-Range": last_modified}
    )
    assert response.status_code == 206
    assert response.content == DATA[-10:]


@pytest.mark.parametrize("method", ["GET", "HEAD"])
async def test_if_none_match_gives_304_without_a_body(
    client: httpx.AsyncClient, artifact: dict[str, Any], method: str
) -> None:
    etag = f'"sha256-{artifact["sha256"]}"'
    response = await client.request(method, content_url(artifact), headers={"If-None-Match": f'"x", {etag}'})
    assert response.status_code == 304
    assert response.content == b""
    assert response.headers["etag"] == etag


async def test_if_modified_since_the_creation_gives_304(
    client: httpx.AsyncClient, artifact: dict[str, Any]
) -> None:
    last_modified = (await client.head(content_url(artifact))).headers["last-modified"]
    response = await client.get(content_url(artifact), headers={"If-Modified-Since": last_modified})
    assert response.status_code == 304
    earlier = await client.get(
        content_url(artifact), headers={"If-Modified-Since": "Mon, 01 Jan 2001 00:00:00 GMT"}
    )
    assert earlier.status_code == 200


@pytest.mark.parametrize(
    ("headers", "status", "length"),
    [({}, 200, SIZE), ({"Range": "bytes=10-19"}, 206, 10), ({"Range": "bytes=0-0,-1"}, 206, None)],
)
async def test_head_gives_the_get_headers_without_a_body(
    client: httpx.AsyncClient,
    artifact: dict[str, Any],
    headers: dict[str, str],
    status: int,
    length: int | None,
) -> None:
    head = await client.head(content_url(artifact), headers=headers)
    get = await client.get(content_url(artifact), headers=headers)
    assert head.status_code == get.status_code == status
    assert head.content == b""
    assert head.headers["content-length"] == get.headers["content-length"]
    if length is not None:
        assert head.headers["content-length"] == str(length)
    assert head.headers["etag"] == get.headers["etag"]


async def test_unknown_artifact_is_404_problem(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/artifacts/a_AAAAAAAAAAAAAAAAAAAAAAAA/content")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


async def test_content_disposition_escapes_the_name(client: httpx.AsyncClient, upload: Uploader) -> None:
    stored = await upload(b"x", name='Bericht "Q3" ü.txt')
    response = await client.get(content_url(stored))
    assert response.headers["content-disposition"] == (
        'attachment; filename="Bericht \\"Q3\\" u.txt"; filename*=UTF-8\'\'Bericht%20%22Q3%22%20%C3%BC.txt'
    )


# -- windows (?offset=&length=) -----------------------------------------------------------------------------


async def test_window_gives_the_clamped_slice_with_window_headers(
    client: httpx.AsyncClient, artifact: dict[str, Any]
) -> None:
    response = await client.get(content_url(artifact), params={"offset": 100, "length": 10_000})
    assert response.status_code == 206
    assert response.content == DATA[100 : 100 + MAX_WINDOW]
    assert response.headers["content-range"] == f"bytes 100-{100 + MAX_WINDOW - 1}/{SIZE}"
    assert response.headers["x-blobstore-eof"] == "false"
    assert response.headers["x-blobstore-next-offset"] == str(100 + MAX_WINDOW)
    assert response.headers["x-blobstore-length"] == str(MAX_WINDOW)


async def test_window_at_the_end_is_empty_with_eof(
    client: httpx.AsyncClient, artifact: dict[str, Any]
) -> None:
    response = await client.get(content_url(artifact), params={"offset": SIZE})
    assert response.status_code == 200
    assert response.content == b""
    assert response.headers["x-blobstore-eof"] == "true"
    assert "x-blobstore-next-offset" not in response.headers


async def test_window_past_the_end_is_416(client: httpx.AsyncClient, artifact: dict[str, Any]) -> None:
    response = await client.get(content_url(artifact), params={"offset": SIZE + 1})
    assert response.status_code == 416
    assert response.json()["code"] == "range_not_satisfiable"


async def test_a_window_length_of_twenty_or_more_digits_is_clamped(
    client: httpx.AsyncClient, artifact: dict[str, Any]
) -> None:
    response = await client.get(
        content_url(artifact), params={"offset": "0" * 30 + "100", "length": "9" * 25}
    )
    assert response.status_code == 206, response.text
    assert response.content == DATA[100 : 100 + MAX_WINDOW]
    assert response.headers["x-blobstore-length"] == str(MAX_WINDOW)


async def test_a_window_offset_of_twenty_or_more_digits_is_416(
    client: httpx.AsyncClient, artifact: dict[str, Any]
) -> None:
    response = await client.get(content_url(artifact), params={"offset": "9" * 20, "length": "10"})
    assert response.status_code == 416, response.text
    assert response.json()["code"] == "range_not_satisfiable"
    assert response.headers["content-range"] == f"bytes */{SIZE}"


@pytest.mark.parametrize("params", [{"offset": "-1"}, {"length": "0"}, {"offset": "1e3"}])
async def test_bad_window_parameters_are_400(
    client: httpx.AsyncClient, artifact: dict[str, Any], params: dict[str, str]
) -> None:
    response = await client.get(content_url(artifact), params=params)
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_range"


@hypothesis_settings
@given(offset=st.integers(0, SIZE - 1), length=st.integers(1, 3 * MAX_WINDOW))
async def test_query_window_equals_the_header_window(
    client: httpx.AsyncClient, artifact: dict[str, Any], offset: int, length: int
) -> None:
    windowed = await client.get(content_url(artifact), params={"offset": offset, "length": length})
    end = min(offset + min(length, MAX_WINDOW), SIZE)
    ranged = await client.get(content_url(artifact), headers={"Range": f"bytes={offset}-{end - 1}"})
    assert windowed.status_code == ranged.status_code == 206
    assert windowed.content == ranged.content == DATA[offset:end]
    assert windowed.headers["content-range"] == ranged.headers["content-range"]


@hypothesis_settings
@given(
    st.lists(
        st.tuples(st.integers(0, SIZE + 100), st.integers(0, 400)).map(lambda t: (t[0], t[0] + t[1])),
        min_size=2,
        max_size=6,
    )
)
async def test_multi_range_bodies_parse_back_to_the_right_bytes(
    client: httpx.AsyncClient, artifact: dict[str, Any], ranges: list[tuple[int, int]]
) -> None:
    header = "bytes=" + ",".join(f"{first}-{last}" for first, last in ranges)
    wanted = {i for first, last in ranges for i in range(first, min(last, SIZE - 1) + 1)}
    response = await client.get(content_url(artifact), headers={"Range": header})
    if not wanted:
        assert response.status_code == 416
        return
    assert response.status_code == 206
    if "content-range" in response.headers:
        parts: list[Iterator[int]] = [
            (int(x) for x in response.headers["content-range"][6:].split("/")[0].split("-"))
        ]
        bodies = [response.content]
    else:
        got = parse_byteranges(response.content, boundary_from(response.headers["content-type"]))
        parts = [iter((first, last)) for first, last, *_ in got]
        bodies = [data for *_, data in got]
    covered: set[int] = set()
    for bounds, body in zip(parts, bodies, strict=True):
        first, last = bounds
        assert body == DATA[first : last + 1]
        covered.update(range(first, last + 1))
    assert covered == wanted


# -- local disk: the zero-copy path -------------------------------------------------------------------------


@pytest.fixture
async def disk_client(tmp_path: Path) -> Any:
    disk_settings = make_settings(tmp_path, storage_url=(tmp_path / "blobs").as_uri())
    async with open_service(disk_settings) as disk_service:
        app = create_app(disk_settings, service=disk_service)
        async with app_client(app) as http:
            yield http


async def test_local_disk_full_and_ranged_downloads_match(disk_client: httpx.AsyncClient) -> None:
    created = await disk_client.post("/v1/artifacts", params={"name": "d.bin"}, content=DATA)
    url = content_url(created.json())
    full = await disk_client.get(url)
    assert full.status_code == 200
    assert full.content == DATA
    assert full.headers["content-length"] == str(SIZE)
    assert full.headers["etag"] == f'"sha256-{created.json()["sha256"]}"'
    # The whole-file response must not re-apply a Range that the plan ignored (If-Range mismatch).
    ignored = await disk_client.get(url, headers={"Range": "bytes=0-9", "If-Range": '"sha256-other"'})
    assert ignored.status_code == 200
    assert ignored.content == DATA
    ranged = await disk_client.get(url, headers={"Range": "bytes=4090-4109"})
    assert ranged.status_code == 206
    assert ranged.content == DATA[4090:4110]


async def test_corrupt_stored_bytes_give_a_corruption_error_not_wrong_bytes(
    client: httpx.AsyncClient, service: Any, artifact: dict[str, Any]
) -> None:
    _, blob = await service.open_artifact(_caller(), artifact["id"])
    service.blobs.flip_byte(blob.key, 5000)
    response = await client.get(content_url(artifact), headers={"Range": "bytes=4990-5009"})
    assert response.status_code == 500
    assert response.json()["code"] == "corruption"
    untouched = await client.get(content_url(artifact), headers={"Range": "bytes=0-99"})
    assert untouched.content == DATA[:100]


def _caller() -> Any:
    from blobstore.models import Caller

    return Caller(namespace="default")

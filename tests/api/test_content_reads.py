"""The content reads' own path (ContentReads, the innermost middleware): what it answers must be what the
app's routes and error table would, for ranges read with the lookup and ranges streamed after it."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from blobstore.api import create_app
from blobstore.config import Settings
from blobstore.runtime import open_service
from tests.api.conftest import Uploader
from tests.fixtures.asgi import app_client
from tests.fixtures.problems import problem
from tests.fixtures.settings import make_settings

BLOCK = 4096  # SMALL_LIMITS["storage_chunk_size"]
MAX_WINDOW = 2048  # SMALL_LIMITS["mcp_window_max"]: longer single ranges stream
DATA = os.urandom(5 * BLOCK + 123)

# [start, end) spans: inside a block, across a boundary, at the window maximum, past it (streamed, several
# blocks), the short last block, everything.
SPANS = [
    (10, 20),
    (BLOCK - 100, BLOCK + 100),
    (BLOCK - 1, BLOCK - 1 + MAX_WINDOW),
    (BLOCK - 1, BLOCK + MAX_WINDOW),
    (BLOCK + 7, 4 * BLOCK + 9),
    (5 * BLOCK, len(DATA)),
    (0, len(DATA)),
]


@pytest.fixture(params=["memory", "local"])
async def reads(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    overrides = {} if request.param == "memory" else {"storage_url": (tmp_path / "blobs").as_uri()}
    read_settings = make_settings(tmp_path, **overrides)
    async with (
        open_service(read_settings, server=False) as read_service,
        app_client(create_app(read_settings, service=read_service)) as http,
    ):
        yield http


@pytest.mark.parametrize(("start", "end"), SPANS)
async def test_a_single_range_gives_exactly_its_bytes(reads: httpx.AsyncClient, start: int, end: int) -> None:
    created = await reads.post("/v1/artifacts", params={"name": "r.bin"}, content=DATA)
    url = f"/v1/artifacts/{created.json()['id']}/content"
    response = await reads.get(url, headers={"Range": f"bytes={start}-{end - 1}"})
    assert response.status_code == 206
    assert response.content == DATA[start:end]
    assert response.headers["content-range"] == f"bytes {start}-{end - 1}/{len(DATA)}"
    assert response.headers["content-length"] == str(end - start)


async def test_a_window_read_with_the_lookup_gives_its_bytes_and_headers(reads: httpx.AsyncClient) -> None:
    created = await reads.post("/v1/artifacts", params={"name": "w.bin"}, content=DATA)
    url = f"/v1/artifacts/{created.json()['id']}/content"
    response = await reads.get(url, params={"offset": BLOCK - 10, "length": 100})
    assert response.status_code == 206
    assert response.content == DATA[BLOCK - 10 : BLOCK + 90]
    assert response.headers["x-blobstore-next-offset"] == str(BLOCK + 90)


async def test_a_content_read_of_a_missing_artifact_is_not_found_before_its_parameters_are_read(
    client: httpx.AsyncClient,
) -> None:
    """The error table's answer with the request id: see test_observability (the content path is one of
    its cases). The lookup comes first: nothing about a missing artifact leaks."""
    unsatisfiable = await client.get(
        "/v1/artifacts/a_AAAAAAAAAAAAAAAAAAAAAAAA/content", params={"offset": "x"}
    )
    problem(unsatisfiable, 404, "not_found")


@pytest.mark.parametrize(
    ("headers", "params", "status", "granted"),
    [
        ({"Range": "bytes=5-104"}, {}, 206, 100),  # read with the lookup
        ({}, {"offset": "7", "length": "50"}, 206, 50),  # a window, read with the lookup
        ({"Range": "bytes=0-9,20-29"}, {}, 206, None),  # multipart: the body with its part heads
        ({}, {}, 200, len(DATA)),  # the whole file, sent by the server
    ],
    ids=["range", "window", "multipart", "whole"],
)
async def test_a_content_read_is_audited_with_the_bytes_it_sent(
    client: httpx.AsyncClient,
    upload: Uploader,
    settings: Settings,
    headers: dict[str, str],
    params: dict[str, str],
    status: int,
    granted: int | None,
) -> None:
    artifact = await upload(DATA, name="a.bin")
    response = await client.get(f"/v1/artifacts/{artifact['id']}/content", headers=headers, params=params)
    assert response.status_code == status
    if granted is None:
        granted = len(response.content)
        assert granted > 20
    assert settings.audit_log is not None
    lines = [json.loads(line) for line in settings.audit_log.read_text().splitlines()]
    reads = [line for line in lines if line["action"] == "read" and line["artifact_id"] == artifact["id"]]
    assert [(line["result"], line["size"]) for line in reads] == [("ok", granted)]


# The content reads are answered ahead of the middleware stack (ContentReads is the app's outermost layer):
# each check of the layers it passes by still runs, or the request goes to those layers.


async def test_a_content_read_under_a_foreign_host_is_refused_as_on_every_route(
    reads: httpx.AsyncClient,
) -> None:
    created = await reads.post("/v1/artifacts", params={"name": "h.bin"}, content=DATA)
    url = f"/v1/artifacts/{created.json()['id']}/content"
    refused = await reads.get(url, headers={"Host": "rebound.example", "Range": "bytes=0-9"})
    problem(refused, 421, "host_not_allowed")
    assert refused.headers["x-request-id"]
    assert DATA[:10] not in refused.content


async def test_a_content_read_with_a_control_byte_in_a_header_is_the_message_guards_400(
    reads: httpx.AsyncClient,
) -> None:
    created = await reads.post("/v1/artifacts", params={"name": "c.bin"}, content=DATA)
    url = f"/v1/artifacts/{created.json()['id']}/content"
    refused = await reads.get(url, headers={"X-Note": "a\x01b"})
    problem(refused, 400, "invalid_request")


async def test_a_content_read_answers_its_request_id_validators_and_conditions(
    reads: httpx.AsyncClient,
) -> None:
    created = await reads.post("/v1/artifacts", params={"name": "v.bin"}, content=DATA)
    url = f"/v1/artifacts/{created.json()['id']}/content"
    first = await reads.get(url, headers={"Range": "bytes=0-99", "X-Request-Id": "req-content-1"})
    assert first.status_code == 206
    assert first.headers["x-request-id"] == "req-content-1"
    etag = first.headers["etag"]
    assert etag == f'"sha256-{created.json()["sha256"]}"'
    assert first.headers["content-security-policy"] == "sandbox"
    assert first.headers["x-content-type-options"] == "nosniff"
    assert (await reads.get(url, headers={"If-None-Match": etag})).status_code == 304
    stale = await reads.get(url, headers={"Range": "bytes=0-99", "If-Range": '"sha256-other"'})
    assert stale.status_code == 200
    assert stale.content == DATA


async def test_with_cors_on_a_content_read_from_a_page_gets_the_cors_headers(tmp_path: Path) -> None:
    origin = "http://app.example"
    settings = make_settings(tmp_path, cors_origins=[origin])
    async with (
        open_service(settings, server=False) as service,
        app_client(create_app(settings, service=service)) as http,
    ):
        created = await http.post("/v1/artifacts", params={"name": "o.bin"}, content=DATA)
        url = f"/v1/artifacts/{created.json()['id']}/content"
        answered = await http.get(url, headers={"Origin": origin, "Range": "bytes=0-9"})
        assert answered.content == DATA[:10]
        assert answered.headers["access-control-allow-origin"] == origin
        plain = await http.get(url, headers={"Range": "bytes=0-9"})
        assert "origin" in plain.headers["vary"].lower()

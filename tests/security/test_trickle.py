"""Bodies that trickle below the minimum rate are cut with 408 ``request_timeout`` and hold nothing; a slow
but steady body is not. Real ``blobstore serve`` processes, real sockets.

The stall timeout alone resets on every byte, so one byte every half second keeps a request alive forever; the
minimum rate (``BLOBSTORE_MIN_BODY_RATE`` bytes per second, averaged over
``BLOBSTORE_MIN_BODY_RATE_WINDOW_SECONDS``) bounds it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.fixtures.server import Server, serving
from tests.security.rawhttp import RawResponse, head_bytes, send_paced

MIN_RATE = 100  # bytes per second
WINDOW = 2  # seconds
SETTINGS = {
    "BLOBSTORE_BODY_TIMEOUT_SECONDS": "5",
    "BLOBSTORE_MIN_BODY_RATE": str(MIN_RATE),
    "BLOBSTORE_MIN_BODY_RATE_WINDOW_SECONDS": str(WINDOW),
    "BLOBSTORE_MIN_CHUNK_SIZE": "1024",
}
# One byte every half second: 2 B/s, far below the minimum rate, and far within the stall timeout.
TRICKLE_INTERVAL = 0.5


@pytest.fixture(scope="module", params=["granian", "uvicorn"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serving(tmp_path_factory.mktemp("trickle"), "--server", request.param, env=SETTINGS) as running:
        yield running


def raw_headers(length: int) -> list[tuple[str, str]]:
    return [
        ("Host", "127.0.0.1"),
        ("Content-Type", "application/octet-stream"),
        ("Content-Length", str(length)),
    ]


def one_byte_forever() -> Iterator[bytes]:
    return itertools.repeat(b"t")


def temp_files(server: Server) -> list[Path]:
    return sorted(server.data_dir.rglob("*.part"))


def assert_cut(response: RawResponse, server: Server) -> None:
    assert response.status == 408, (response.status, response.body)
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["code"] == "request_timeout"
    assert temp_files(server) == []


def test_a_trickling_single_request_upload_is_cut_with_408(server: Server) -> None:
    head = head_bytes(
        "POST",
        "/v1/artifacts?name=trickle.bin",
        raw_headers(5_000_000_000),
    )
    assert_cut(send_paced(server.url, head, one_byte_forever(), TRICKLE_INTERVAL), server)
    assert httpx.get(f"{server.url}/v1/artifacts").json()["items"] == []


def test_a_trickling_chunk_put_is_cut_with_408(server: Server) -> None:
    begun = httpx.post(f"{server.url}/v1/uploads", json={"name": "c.bin", "chunk_size": 4096, "size": 8192})
    assert begun.status_code == 201, begun.text
    upload = begun.json()["upload_id"]
    head = head_bytes(
        "PUT",
        f"/v1/uploads/{upload}/chunks/0",
        raw_headers(4096),
    )
    assert_cut(send_paced(server.url, head, one_byte_forever(), TRICKLE_INTERVAL), server)
    status = httpx.get(f"{server.url}/v1/uploads/{upload}").json()
    assert status["chunks_received"] == []


def test_a_trickling_tus_patch_is_cut_with_408(server: Server) -> None:
    created = httpx.post(f"{server.url}/tus/", headers={"Tus-Resumable": "1.0.0", "Upload-Length": "100000"})
    assert created.status_code == 201, created.text
    location = created.headers["location"]
    head = head_bytes(
        "PATCH",
        location,
        [
            ("Host", "127.0.0.1"),
            ("Tus-Resumable", "1.0.0"),
            ("Upload-Offset", "0"),
            ("Content-Type", "application/offset+octet-stream"),
            ("Content-Length", "100000"),
        ],
    )
    assert_cut(send_paced(server.url, head, one_byte_forever(), TRICKLE_INTERVAL), server)


def test_a_slow_but_steady_upload_above_the_minimum_rate_is_stored(server: Server) -> None:
    # 4x the minimum rate for three windows: 50 bytes every eighth of a second.
    piece, interval, count = 50, 0.125, 8 * 3 * WINDOW
    data = bytes(range(256)) * (piece * count // 256 + 1)
    data = data[: piece * count]
    head = head_bytes(
        "POST",
        "/v1/artifacts?name=steady.bin",
        raw_headers(len(data)),
    )
    pieces = (data[i : i + piece] for i in range(0, len(data), piece))
    response = send_paced(server.url, head, pieces, interval)
    assert response.status == 201, (response.status, response.body)
    stored = response.json()
    assert stored["size"] == len(data)
    assert httpx.get(f"{server.url}/v1/artifacts/{stored['id']}/content").content == data

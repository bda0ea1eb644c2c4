"""End to end: a real ``blobstore serve`` process per ASGI server, on loopback, with a local-disk data dir."""

from __future__ import annotations

import hashlib
import os
import socket
from collections.abc import Iterator

import anyio
import httpx
import pytest

from blobstore.cli.serve import SERVERS
from tests.api.byteranges import boundary_from, parse_byteranges
from tests.fixtures.server import serving

pytestmark = pytest.mark.e2e

CHUNK = 64 * 1024
DATA = os.urandom(CHUNK * 6 + 1234)  # seven chunks, the last one short
SHA = hashlib.sha256(DATA).hexdigest()


@pytest.fixture(scope="module", params=SERVERS)
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp(f"serve-{request.param}")
    env = {"BLOBSTORE_MIN_CHUNK_SIZE": "1024", "BLOBSTORE_LOG_LEVEL": "warning"}
    with serving(root, "--server", request.param, env=env) as running:
        yield running.url


def chunk(index: int) -> bytes:
    return DATA[index * CHUNK : (index + 1) * CHUNK]


def abort_half_way(base: str, path: str, body: bytes) -> None:
    """Send the headers and half the body of a PUT, then drop the connection."""
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as sock:
        head = f"PUT {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {len(body)}\r\n\r\n"
        sock.sendall(head.encode() + body[: len(body) // 2])


@pytest.fixture(scope="module")
def artifact_id(server: str) -> str:
    """Upload DATA out of order, in parallel, with a resend and an interrupted chunk; return the id."""

    async def run() -> str:
        async with httpx.AsyncClient(base_url=server, timeout=30) as client:
            created = await client.post(
                "/v1/uploads", json={"name": "e2e.bin", "size": len(DATA), "chunk_size": CHUNK}
            )
            assert created.status_code == 201, created.text
            upload_id = created.json()["upload_id"]
            abort_half_way(server, f"/v1/uploads/{upload_id}/chunks/3", chunk(3))
            statuses: list[int] = []

            async def send(index: int) -> None:
                response = await client.put(f"/v1/uploads/{upload_id}/chunks/{index}", content=chunk(index))
                statuses.append(response.status_code)

            async with anyio.create_task_group() as group:
                for index in (6, 1, 4, 0, 5, 2, 1):  # out of order; chunk 1 twice; chunk 3 is missing
                    group.start_soon(send, index)
            assert statuses == [200] * 7
            status = (await client.get(f"/v1/uploads/{upload_id}")).json()
            # The interrupted chunk was not kept.
            assert status["missing"] == [3]
            assert (
                await client.put(f"/v1/uploads/{upload_id}/chunks/3", content=chunk(3))
            ).status_code == 200
            done = await client.post(f"/v1/uploads/{upload_id}/complete", json={"sha256": SHA})
            assert done.status_code == 201, done.text
            result: str = done.json()["id"]
            return result

    return anyio.run(run)


def test_download_is_byte_identical(server: str, artifact_id: str) -> None:
    response = httpx.get(f"{server}/v1/artifacts/{artifact_id}/content")
    assert response.status_code == 200
    assert response.content == DATA
    assert response.headers["etag"] == f'"sha256-{SHA}"'


def test_multi_range(server: str, artifact_id: str) -> None:
    response = httpx.get(
        f"{server}/v1/artifacts/{artifact_id}/content", headers={"Range": "bytes=0-9,100000-100099,-5"}
    )
    assert response.status_code == 206
    parts = parse_byteranges(response.content, boundary_from(response.headers["content-type"]))
    assert [data for *_, data in parts] == [DATA[0:10], DATA[100_000:100_100], DATA[-5:]]


def test_unsatisfiable_range(server: str, artifact_id: str) -> None:
    response = httpx.get(
        f"{server}/v1/artifacts/{artifact_id}/content", headers={"Range": f"bytes={len(DATA)}-"}
    )
    assert response.status_code == 416
    assert response.headers["content-range"] == f"bytes */{len(DATA)}"


def test_if_range(server: str, artifact_id: str) -> None:
    url = f"{server}/v1/artifacts/{artifact_id}/content"
    matching = httpx.get(url, headers={"Range": "bytes=5-9", "If-Range": f'"sha256-{SHA}"'})
    assert matching.status_code == 206
    assert matching.content == DATA[5:10]
    stale = httpx.get(url, headers={"Range": "bytes=5-9", "If-Range": '"sha256-stale"'})
    assert stale.status_code == 200
    assert stale.content == DATA


def test_if_none_match(server: str, artifact_id: str) -> None:
    response = httpx.get(
        f"{server}/v1/artifacts/{artifact_id}/content", headers={"If-None-Match": f'"sha256-{SHA}"'}
    )
    assert response.status_code == 304
    assert response.content == b""


def test_head(server: str, artifact_id: str) -> None:
    response = httpx.head(f"{server}/v1/artifacts/{artifact_id}/content")
    assert response.status_code == 200
    assert response.headers["content-length"] == str(len(DATA))
    assert response.headers["accept-ranges"] == "bytes"
    assert response.content == b""

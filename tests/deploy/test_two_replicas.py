"""Two ``blobstore serve`` replicas on one PostgreSQL database and one s3rver bucket, behind the shipped
``deploy/nginx.conf``: what one replica stores, the other serves, and nginx spreads requests over both."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.deploy.nginx import render_site, running
from tests.fixtures.ports import free_port
from tests.fixtures.server import Server, start_server, stop_server
from tests.fixtures.waiting import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.s3]

DEADLINE_SECONDS = 120.0
CHUNK = 1024 * 1024


def served_by(server: Server, request_id: str) -> bool:
    """Whether ``server`` wrote the access line of ``request_id``."""
    return f'"request_id":"{request_id}"' in server.log.read_text(errors="replace")


@pytest.fixture
def replicas(
    tmp_path: Path, pg_url: str, s3rver_storage_url: str, s3rver_endpoint_url: str
) -> Iterator[tuple[Server, Server]]:
    env = {
        "BLOBSTORE_DATABASE_URL": pg_url,
        "BLOBSTORE_STORAGE_URL": s3rver_storage_url,
        "BLOBSTORE_S3_ENDPOINT_URL": s3rver_endpoint_url,
        "BLOBSTORE_METRICS": "true",
    }
    for name in ("replica-1", "replica-2"):
        (tmp_path / name).mkdir()
    first = start_server(tmp_path / "replica-1", env=env)
    try:
        second = start_server(tmp_path / "replica-2", env=env)
        try:
            yield first, second
        finally:
            stop_server(second)
    finally:
        stop_server(first)


@pytest.fixture
def nginx(tmp_path: Path, replicas: tuple[Server, Server]) -> Iterator[str]:
    root = tmp_path / "nginx"
    root.mkdir()
    port = free_port()
    upstreams = [int(server.url.rsplit(":", 1)[1]) for server in replicas]
    with running(root, render_site(port, upstreams), port, within=DEADLINE_SECONDS) as url:
        yield url


def test_one_replica_stores_the_other_serves_and_nginx_spreads_requests_over_both(
    replicas: tuple[Server, Server], nginx: str
) -> None:
    first, second = replicas
    data = os.urandom(3 * CHUNK + 12345)
    digest = hashlib.sha256(data).hexdigest()
    with httpx.Client(timeout=120) as http:
        # A chunked upload begun on one replica, its chunks sent to both, completed on the other.
        begun = http.post(
            f"{first.url}/v1/uploads", json={"name": "spread.bin", "size": len(data), "chunk_size": CHUNK}
        )
        assert begun.status_code == 201, begun.text
        upload_id = begun.json()["upload_id"]
        for index in range(0, len(data) // CHUNK + 1):
            target = (first, second)[index % 2]
            sent = http.put(
                f"{target.url}/v1/uploads/{upload_id}/chunks/{index}",
                content=data[index * CHUNK : (index + 1) * CHUNK],
            )
            assert sent.status_code in (200, 201, 204), sent.text
        done = http.post(f"{second.url}/v1/uploads/{upload_id}/complete", json={"sha256": digest})
        assert done.status_code in (200, 201), done.text
        artifact_id = done.json()["id"]
        assert http.get(f"{first.url}/v1/artifacts/{artifact_id}/content").content == data

        # Through nginx: a single-request upload, then downloads until both replicas have served one.
        stored = http.post(
            f"{nginx}/v1/artifacts",
            params={"name": "lb.bin"},
            content=data,
            headers={"X-Request-Id": "lb-upload"},
        )
        assert stored.status_code == 201, stored.text
        assert stored.headers["x-request-id"] == "lb-upload"
        lb_id = stored.json()["id"]
        wait_until(
            lambda: served_by(first, "lb-upload") or served_by(second, "lb-upload"),
            within=DEADLINE_SECONDS,
            what="the upload's log line",
        )
        uploader, other = (first, second) if served_by(first, "lb-upload") else (second, first)
        assert http.get(f"{other.url}/v1/artifacts/{lb_id}/content").content == data

        request_ids = []
        for attempt in range(20):
            request_id = f"lb-download-{attempt}"
            request_ids.append(request_id)
            got = http.get(f"{nginx}/v1/artifacts/{lb_id}/content", headers={"X-Request-Id": request_id})
            assert got.status_code == 200
            assert got.content == data
            if any(served_by(uploader, rid) for rid in request_ids) and any(
                served_by(other, rid) for rid in request_ids
            ):
                break
        wait_until(
            lambda: (
                any(served_by(first, rid) for rid in request_ids)
                and any(served_by(second, rid) for rid in request_ids)
            ),
            within=DEADLINE_SECONDS,
            what="downloads through nginx on both replicas",
        )

        # Each replica counts what it served itself.
        for server in (first, second):
            metrics = http.get(f"{server.url}/metrics")
            assert metrics.status_code == 200
            assert 'route="/v1/artifacts/{artifact_id}/content",status="200"' in metrics.text

"""``blobstore serve`` on PostgreSQL + S3 as an operator starts it: a fresh database, a checked bucket."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fixtures.ports import free_port
from tests.fixtures.s3 import S3Location
from tests.fixtures.server import BLOBSTORE, start_server, stop_server

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.s3]

START_TIMEOUT_SECONDS = 180.0


def scale_out_env(database_url: str, storage_url: str, endpoint_url: str) -> dict[str, str]:
    return {
        "BLOBSTORE_DATABASE_URL": database_url,
        "BLOBSTORE_STORAGE_URL": storage_url,
        "BLOBSTORE_S3_ENDPOINT_URL": endpoint_url,
    }


def test_serve_on_a_never_migrated_postgresql_database_migrates_it_and_serves_from_s3rver(
    tmp_path: Path, pg_url: str, s3rver_storage_url: str, s3rver_endpoint_url: str
) -> None:
    server = start_server(tmp_path, env=scale_out_env(pg_url, s3rver_storage_url, s3rver_endpoint_url))
    try:
        data = os.urandom(300_000)
        with httpx.Client(base_url=server.url, timeout=60) as http:
            stored = http.post("/v1/artifacts", params={"name": "x.bin"}, content=data)
            assert stored.status_code == 201, stored.text
            assert stored.json()["sha256"] == hashlib.sha256(data).hexdigest()
            assert http.get(f"/v1/artifacts/{stored.json()['id']}/content").content == data
            ready = http.get("/readyz")
        assert ready.json() == {"status": "ok", "checks": {"database": "ok", "storage": "ok"}}
        assert stat.S_IMODE(server.data_dir.stat().st_mode) == 0o700
        # The start-up probe's line, as docs/operations.md shows it: s3rver has none of the three features.
        probed = (
            f"blobstore: S3 bucket {s3rver_storage_url} at {s3rver_endpoint_url}: conditional writes no, "
            "UploadPartCopy no, AbortMultipartUpload no"
        )
        assert probed in server.log_text().splitlines()
    finally:
        stop_server(server)


def test_serve_with_a_missing_bucket_stops_with_one_line_naming_bucket_and_endpoint(
    tmp_path: Path, pg_url: str, s3rver_endpoint_url: str
) -> None:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("BLOBSTORE_")}
    environment.update(scale_out_env(pg_url, "s3://no-such-bucket/prefix", s3rver_endpoint_url))
    command = [str(BLOBSTORE), "serve", "--port", str(free_port()), "--data-dir", str(tmp_path / "data")]
    finished = subprocess.run(
        command, env=environment, capture_output=True, text=True, timeout=START_TIMEOUT_SECONDS, check=False
    )
    assert finished.returncode != 0
    lines = finished.stderr.strip().splitlines()
    assert "Traceback" not in finished.stderr
    assert "no-such-bucket" in lines[-1]
    assert s3rver_endpoint_url in lines[-1]
    assert "NoSuchBucket" in lines[-1]
    assert "testing" not in finished.stderr  # the fixture's credentials


def test_readyz_names_the_bucket_when_it_disappears(
    tmp_path: Path,
    pg_url: str,
    s3rver_storage_url: str,
    s3rver_endpoint_url: str,
    s3rver_location: S3Location,
    s3rver_client: Any,
) -> None:
    server = start_server(tmp_path, env=scale_out_env(pg_url, s3rver_storage_url, s3rver_endpoint_url))
    try:
        s3rver_client.delete_bucket(Bucket=s3rver_location.bucket)
        try:
            ready = httpx.get(f"{server.url}/readyz", timeout=60)
        finally:
            s3rver_client.create_bucket(Bucket=s3rver_location.bucket)
        assert ready.status_code == 503
        body = ready.json()
        assert body["checks"]["storage"] == "storage_unavailable"
        assert s3rver_location.bucket in body["details"]["storage"]
        assert "NoSuchBucket" in body["details"]["storage"]
        assert "testing" not in ready.text
    finally:
        stop_server(server)

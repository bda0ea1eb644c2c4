"""``blobstore serve --cleanup-interval`` runs the cleanup job inside the server process."""

from __future__ import annotations

import os
from pathlib import Path

import httpx

from tests.fixtures.server import start_server, stop_server
from tests.fixtures.waiting import wait_until

DEADLINE_SECONDS = 60.0


def blob_files(data_dir: Path) -> list[Path]:
    return [
        path for path in (data_dir / "blobs").rglob("*") if path.is_file() and "blobs" in path.parts[-4:-1]
    ]


def test_serve_with_cleanup_interval_frees_expired_artifacts_without_an_admin_command(tmp_path: Path) -> None:
    server = start_server(tmp_path, "--cleanup-interval", "1", env={"BLOBSTORE_GC_GRACE_SECONDS": "0"})
    url, data_dir = server.url, server.data_dir
    try:
        keep = httpx.post(f"{url}/v1/artifacts", params={"name": "keep.bin"}, content=os.urandom(4096))
        gone = httpx.post(
            f"{url}/v1/artifacts", params={"name": "gone.bin", "ttl_seconds": "1"}, content=os.urandom(4096)
        )
        assert keep.status_code == gone.status_code == 201
        assert len(blob_files(data_dir)) == 2
        wait_until(lambda: len(blob_files(data_dir)) == 1, within=DEADLINE_SECONDS, what=server.log_text)
        assert httpx.get(f"{url}/v1/artifacts/{gone.json()['id']}").status_code == 404
        kept = httpx.get(f"{url}/v1/artifacts/{keep.json()['id']}/content")
        assert kept.status_code == 200
        assert len(kept.content) == 4096
    finally:
        stop_server(server)

"""``blobstore serve --cleanup-interval`` runs the cleanup job inside the server process."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import httpx

from tests.e2e.conftest import BLOBSTORE, free_port

DEADLINE_SECONDS = 60.0


def blob_files(data_dir: Path) -> list[Path]:
    return [
        path for path in (data_dir / "blobs").rglob("*") if path.is_file() and "blobs" in path.parts[-4:-1]
    ]


def test_serve_with_cleanup_interval_frees_expired_artifacts_without_an_admin_command(tmp_path: Path) -> None:
    port = free_port()
    data_dir = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith("BLOBSTORE_")}
    env["BLOBSTORE_GC_GRACE_SECONDS"] = "0"
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                str(BLOBSTORE),
                "serve",
                "--port",
                str(port),
                "--data-dir",
                str(data_dir),
                "--cleanup-interval",
                "1",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + DEADLINE_SECONDS
        while True:
            assert process.poll() is None, log.read_text()
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        keep = httpx.post(f"{url}/v1/artifacts", params={"name": "keep.bin"}, content=os.urandom(4096))
        gone = httpx.post(
            f"{url}/v1/artifacts", params={"name": "gone.bin", "ttl_seconds": "1"}, content=os.urandom(4096)
        )
        assert keep.status_code == gone.status_code == 201
        assert len(blob_files(data_dir)) == 2
        while len(blob_files(data_dir)) != 1:
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        assert httpx.get(f"{url}/v1/artifacts/{gone.json()['id']}").status_code == 404
        kept = httpx.get(f"{url}/v1/artifacts/{keep.json()['id']}/content")
        assert kept.status_code == 200
        assert len(kept.content) == 4096
    finally:
        process.terminate()
        process.wait(timeout=15)

"""aria2c fetches a 64 MiB artifact over 8 parallel ranged connections, byte-identical to the original."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from blobstore.client import BlobstoreClient
from tests.e2e.files import sha256_file, write_distinct_blocks
from tests.fixtures.server import Server

pytestmark = pytest.mark.e2e


def test_aria2c_segmented_download_is_identical(server: Server, tmp_path: Path) -> None:
    original = tmp_path / "artifact.bin"
    expected = write_distinct_blocks(original, 64)
    with BlobstoreClient(server.url) as client:
        artifact = client.upload(original, resume=False).artifact
    out_dir = tmp_path / "aria2"

    completed = subprocess.run(
        [
            "aria2c",
            "-x", "8",
            "-s", "8",
            "-k", "1M",  # the default 20 MiB minimum split would cap a 64 MiB file at 4 segments
            "--file-allocation=none",
            "--auto-file-renaming=false",
            "--summary-interval=0",
            "--console-log-level=warn",
            "-d", str(out_dir),
            "-o", "fetched.bin",
            f"{server.url}/v1/artifacts/{artifact.id}/content",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )  # fmt: skip

    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert artifact.sha256 == expected
    assert sha256_file(out_dir / "fetched.bin") == expected

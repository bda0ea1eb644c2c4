"""The blocking client against a real server: the same transfers, run on a helper thread's event loop."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from blobstore.client import BlobstoreClient, UploadStateStore
from blobstore.errors import NotFound
from tests.fixtures.server import Server

pytestmark = pytest.mark.e2e


def test_blocking_client_uploads_downloads_lists_and_deletes(server: Server, tmp_path: Path) -> None:
    data = os.urandom(600_000)
    (tmp_path / "a.bin").write_bytes(data)
    progress: list[tuple[int, int]] = []

    with BlobstoreClient(server.url, state_store=UploadStateStore(tmp_path / "state")) as client:
        from_file = client.upload(tmp_path / "a.bin", chunk_size=256 * 1024)
        from_iterable = client.upload(iter([data[:10], data[10:]]), name="b.bin")
        window = client.download(from_iterable.artifact.id, tmp_path / "w", range=(5, 300_005))
        whole = client.download(
            from_file.artifact.id, tmp_path / "b", progress=lambda d, t: progress.append((d, t))
        )
        listed = {item.id for item in client.iter_artifacts(page_size=1)}
        client.delete_artifact(from_file.artifact.id)
        with pytest.raises(NotFound):
            client.get_artifact(from_file.artifact.id)

    assert from_file.chunks_sent == 3
    assert from_file.artifact.sha256 == from_iterable.artifact.sha256
    assert whole.path.read_bytes() == data
    assert window.path.read_bytes() == data[5:300_005]
    assert progress[-1] == (len(data), len(data))
    assert {from_file.artifact.id, from_iterable.artifact.id} <= listed

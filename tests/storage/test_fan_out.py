"""The fan-out directories a publish needs: each made and synced once, and made again when removed."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from blobstore.digests import sha256_hex
from blobstore.storage import LocalBlobStore
from blobstore.storage.dir_sync import DirectorySync, fsync_dir
from tests.storage.conftest import chunks_of, read_all


def recording_store(root: Path) -> tuple[LocalBlobStore, list[Path]]:
    synced: list[Path] = []

    def fsync(path: Path) -> None:
        synced.append(path)
        fsync_dir(path)

    return LocalBlobStore(root, directory_sync=DirectorySync(fsync)), synced


async def test_a_first_publish_into_a_new_second_level_directory_makes_only_that_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "store"
    store, synced = recording_store(root)
    made: list[str] = []
    mkdir = os.mkdir

    def recording_mkdir(path: str | os.PathLike[str], mode: int = 0o777) -> None:
        made.append(os.fspath(path))
        mkdir(path, mode)

    monkeypatch.setattr(os, "mkdir", recording_mkdir)
    synced.clear()
    blob = await store.put(chunks_of(b"new content"))

    second_level = (root / blob.key).parent
    # No attempt on blobs/<ab>, which the store made durable when it opened.
    assert made == [str(second_level)]
    # The new directory's entry in blobs/<ab>, then the blob's entry in it.
    assert synced == [second_level.parent, second_level]


async def test_a_first_level_directory_removed_behind_the_store_is_created_again(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store, synced = recording_store(root)
    first = await store.put(chunks_of(b"content"))
    await store.delete(first.key)
    first_level = (root / first.key).parent.parent
    shutil.rmtree(first_level)

    synced.clear()
    second = await store.put(chunks_of(b"content"))

    assert await read_all(store, second) == b"content"
    assert second.sha256 == sha256_hex(b"content")
    # blobs/<ab> was made again and its entry synced in blobs/, before the second level and the blob.
    assert synced == [root / "blobs", first_level, first_level / second.key.split("/")[2]]

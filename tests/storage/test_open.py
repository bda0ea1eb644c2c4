"""Storage URLs select and configure a backend."""

from __future__ import annotations

from pathlib import Path

import pytest

from blobstore.errors import InvalidRequest
from blobstore.storage import LocalBlobStore, MemoryBlobStore, S3BlobStore, open_blob_store


def test_memory_url_opens_the_memory_backend() -> None:
    store = open_blob_store("memory://", block_size=4096)
    assert isinstance(store, MemoryBlobStore)
    assert store.block_size == 4096


def test_file_url_opens_a_local_store_at_that_path(tmp_path: Path) -> None:
    store = open_blob_store(f"file://{tmp_path}/data%20dir")
    assert isinstance(store, LocalBlobStore)
    assert store.root == tmp_path / "data dir"
    assert (tmp_path / "data dir" / "blobs").is_dir()


def test_bare_file_url_uses_the_data_directory(tmp_path: Path) -> None:
    store = open_blob_store("file:", data_dir=tmp_path)
    assert isinstance(store, LocalBlobStore)
    assert store.root == tmp_path / "storage"


def test_s3_url_names_bucket_and_prefix() -> None:
    store = open_blob_store(
        "s3://my-bucket/some/prefix/", s3_endpoint_url="http://127.0.0.1:1", s3_region="eu-west-1"
    )
    assert isinstance(store, S3BlobStore)
    assert (store.bucket, store.prefix) == ("my-bucket", "some/prefix")
    assert store.client.meta.region_name == "eu-west-1"


@pytest.mark.parametrize(
    "url",
    [
        "ftp://host/x",
        "file://remote-host/x",
        "file://relative",
        "file:///a/../b",
        "file:",
        "s3:///prefix",
        "s3://bucket/../up",
        "memory",
    ],
)
def test_malformed_storage_urls_are_refused(url: str) -> None:
    with pytest.raises(InvalidRequest):
        open_blob_store(url)

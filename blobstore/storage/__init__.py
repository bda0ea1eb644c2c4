"""Blob storage: the :class:`BlobStore` contract and its memory, local-disk and S3 backends.

``open_blob_store`` turns a storage URL into a backend; only the composition roots call it. The S3 backend is
imported on demand so that boto3 stays an optional dependency.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from blobstore.errors import InvalidRequest
from blobstore.storage.base import (
    DEFAULT_BLOCK_SIZE,
    BlobStore,
    DirectPart,
    ProgressCallback,
    SupportsDirectUpload,
    SupportsLocalPath,
    SupportsPresign,
)
from blobstore.storage.local import LocalBlobStore
from blobstore.storage.memory import MemoryBlobStore

if TYPE_CHECKING:
    from blobstore.storage.s3 import S3BlobStore

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "BlobStore",
    "DirectPart",
    "LocalBlobStore",
    "MemoryBlobStore",
    "ProgressCallback",
    "S3BlobStore",
    "SupportsDirectUpload",
    "SupportsLocalPath",
    "SupportsPresign",
    "open_blob_store",
]


def __getattr__(name: str) -> Any:
    if name == "S3BlobStore":
        from blobstore.storage.s3 import S3BlobStore

        return S3BlobStore
    raise AttributeError(name)


def open_blob_store(
    storage_url: str,
    *,
    s3_endpoint_url: str | None = None,
    s3_region: str | None = None,
    block_size: int = DEFAULT_BLOCK_SIZE,
    io_threads: int = 8,
    data_dir: Path | None = None,
    verified_block_seconds: float = 0,
) -> BlobStore:
    """Open the backend a storage URL names.

    ``memory://``; ``file:///abs/path`` (or ``file:`` with no path: ``<data_dir>/storage``);
    ``s3://bucket/prefix`` (credentials from the standard AWS environment and config files).
    ``verified_block_seconds``: how long local disk trusts a block a read checked (``verified_blocks``).
    """
    parts = urlsplit(storage_url)
    scheme = parts.scheme.lower()
    if scheme == "memory":
        return MemoryBlobStore(block_size=block_size)
    if scheme == "file":
        return LocalBlobStore(
            _local_root(parts.netloc, unquote(parts.path), data_dir),
            block_size=block_size,
            io_threads=io_threads,
            verified_block_seconds=verified_block_seconds,
        )
    if scheme == "s3":
        from blobstore.storage.s3 import S3BlobStore

        if not parts.netloc:
            raise InvalidRequest("s3 storage URL needs a bucket: s3://bucket/prefix")
        return S3BlobStore(
            parts.netloc,
            parts.path,
            endpoint_url=s3_endpoint_url,
            region=s3_region,
            block_size=block_size,
            io_threads=io_threads,
        )
    raise InvalidRequest("storage URL must start with memory://, file:// or s3://")


def _local_root(netloc: str, path: str, data_dir: Path | None) -> Path:
    if netloc not in ("", "localhost"):
        raise InvalidRequest("file storage URL must name a local path: file:///abs/path")
    if not path:
        if data_dir is None:
            raise InvalidRequest("file storage URL needs a path or a data directory")
        return (data_dir / "storage").absolute()
    root = Path(path)
    if not root.is_absolute() or ".." in root.parts or "\x00" in path:
        raise InvalidRequest("file storage URL needs an absolute path without '..'")
    return root

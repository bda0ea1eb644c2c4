"""The ``store`` fixture runs every contract test against the memory, local-disk and S3 backends.

S3 runs on two implementations: moto (``s3``) and s3rver (``s3rver``), which lacks optional S3 features.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from blobstore.storage import BlobStore, LocalBlobStore, MemoryBlobStore, open_blob_store
from blobstore.storage.s3 import S3BlobStore
from tests.fixtures.streams import chunks_of as chunks_of

BLOCK = 64 * 1024
"""Small blocks keep multi-chunk cases cheap on moto."""

FlipByte = Callable[[BlobStore, str, int], Awaitable[None]]


S3_ENDPOINTS = ["s3", "s3rver"]
"""Fixture-name prefixes of the S3 implementations: ``<name>_storage_url``, ``_endpoint_url``, ``_client``."""


@pytest.fixture(
    params=[
        "memory",
        "local",
        pytest.param("s3", marks=pytest.mark.s3),
        pytest.param("s3rver", marks=pytest.mark.s3),
    ]
)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[BlobStore]:
    kind = request.param
    endpoint: str | None = None
    if kind == "memory":
        url = "memory://"
    elif kind == "local":
        url = f"file://{tmp_path / 'store'}"
    else:
        url = request.getfixturevalue(f"{kind}_storage_url")
        endpoint = request.getfixturevalue(f"{kind}_endpoint_url")
    opened = open_blob_store(url, s3_endpoint_url=endpoint, block_size=BLOCK, io_threads=4)
    assert opened.kind == ("s3" if kind in S3_ENDPOINTS else kind)
    yield opened
    await opened.close()


@pytest.fixture
def flip_byte(request: pytest.FixtureRequest) -> FlipByte:
    """Invert one byte of a stored object behind the backend's back."""

    async def flip(store: BlobStore, key: str, offset: int) -> None:
        if isinstance(store, MemoryBlobStore):
            store.flip_byte(key, offset)
        elif isinstance(store, LocalBlobStore):
            with (store.root / key).open("r+b") as handle:
                handle.seek(offset)
                original = handle.read(1)
                handle.seek(offset)
                handle.write(bytes([original[0] ^ 0xFF]))
        elif isinstance(store, S3BlobStore):
            implementation = request.node.callspec.params["store"]
            client: Any = request.getfixturevalue(f"{implementation}_client")
            object_key = f"{store.prefix}/{key}"
            data = bytearray(client.get_object(Bucket=store.bucket, Key=object_key)["Body"].read())
            data[offset] ^= 0xFF
            client.put_object(Bucket=store.bucket, Key=object_key, Body=bytes(data))
        else:
            raise AssertionError(f"no corruption helper for {store.kind}")

    return flip


async def read_all(store: BlobStore, blob: Any, offset: int = 0, length: int | None = None) -> bytes:
    return b"".join([part async for part in store.read(blob, offset, length)])


async def keys_of(store: BlobStore) -> set[str]:
    return {item.key async for item in store.iter_objects()}


async def staging_refs(store: BlobStore) -> set[str]:
    return {entry.staging_ref async for entry in store.iter_staging()}

"""``read_blocking`` of the backends that offer it (memory, local disk): the bytes and the integrity checks of
``read``, in one piece, for a caller on a worker thread."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import anyio.to_thread
import pytest

from blobstore.errors import Corruption, NotFound
from blobstore.storage import LocalBlobStore, MemoryBlobStore, open_blob_store
from blobstore.storage.base import SupportsBlockingRead
from tests.fixtures.streams import chunks_of
from tests.storage.conftest import BLOCK, FlipByte, read_all


@pytest.fixture(params=["memory", "local", "local-remembering"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SupportsBlockingRead]:
    url = "memory://" if request.param == "memory" else f"file://{tmp_path / 'store'}"
    # "local-remembering": blocks a read checked are trusted for a minute (verified_blocks.py).
    remember = 60.0 if request.param == "local-remembering" else 0.0
    opened = open_blob_store(url, block_size=BLOCK, io_threads=4, verified_block_seconds=remember)
    assert isinstance(opened, SupportsBlockingRead)
    yield opened
    await opened.close()


def _store(store: SupportsBlockingRead) -> MemoryBlobStore | LocalBlobStore:
    assert isinstance(store, MemoryBlobStore | LocalBlobStore)
    return store


@pytest.mark.parametrize(
    ("offset", "length"),
    [
        (0, 3 * BLOCK + 100),  # everything
        (10, 100),  # inside the first block
        (BLOCK - 50, 100),  # across a block boundary
        (BLOCK, BLOCK),  # exactly one block
        (BLOCK - 1, 2 * BLOCK + 2),  # three blocks, partly
        (3 * BLOCK, 100),  # the short last block, whole
        (3 * BLOCK + 90, 1000),  # past the end: clamped
        (3 * BLOCK + 100, 10),  # at the end: empty
        (5, 0),  # empty
    ],
)
async def test_read_blocking_gives_the_bytes_read_gives(
    store: SupportsBlockingRead, offset: int, length: int
) -> None:
    data = os.urandom(3 * BLOCK + 100)
    blob = await _store(store).put(chunks_of(data))
    got = await anyio.to_thread.run_sync(store.read_blocking, blob, offset, length)
    assert got == data[offset : offset + length]
    assert got == await read_all(_store(store), blob, offset, length)
    assert store.read_blocking(blob, offset, length) == got  # again, from blocks checked a moment ago


async def test_read_blocking_refuses_a_range_touching_a_corrupt_block(
    store: SupportsBlockingRead, flip_byte: FlipByte
) -> None:
    data = os.urandom(3 * BLOCK)
    blob = await _store(store).put(chunks_of(data))
    await flip_byte(_store(store), blob.key, BLOCK + 17)
    with pytest.raises(Corruption) as caught:
        store.read_blocking(blob, BLOCK + 100, 10)
    assert caught.value.details == {"chunk": 1}
    with pytest.raises(Corruption):
        store.read_blocking(blob, BLOCK - 5, 10)  # starts in a sound block, ends in the corrupt one
    assert store.read_blocking(blob, 0, BLOCK) == data[:BLOCK]
    assert store.read_blocking(blob, 2 * BLOCK + 5, 100) == data[2 * BLOCK + 5 :][:100]


async def test_read_blocking_of_a_missing_object_is_not_found(store: SupportsBlockingRead) -> None:
    blob = await _store(store).put(chunks_of(b"gone soon"))
    await _store(store).delete(blob.key)
    with pytest.raises(NotFound):
        store.read_blocking(blob, 0, 4)


async def test_read_blocking_of_a_truncated_file_is_corruption(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path / "store", block_size=BLOCK)
    data = os.urandom(2 * BLOCK)
    blob = await store.put(chunks_of(data))
    os.truncate(store.local_path(blob), BLOCK + 10)
    assert store.read_blocking(blob, 0, 100) == data[:100]
    with pytest.raises(Corruption) as caught:
        store.read_blocking(blob, BLOCK, 100)
    assert caught.value.details == {"chunk": 1}

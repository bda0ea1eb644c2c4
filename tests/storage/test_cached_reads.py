"""``read_cached`` of the backends that offer it (memory, local disk): ``read_blocking``'s bytes and checks
when everything the read needs is in memory, and ``WouldBlock`` instead of a wait for the disk."""

from __future__ import annotations

import errno
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from blobstore.errors import BlobstoreError, Corruption, NotFound
from blobstore.models import BlobInfo
from blobstore.nowait import WouldBlock
from blobstore.storage import LocalBlobStore, MemoryBlobStore, open_blob_store
from blobstore.storage.base import SupportsCachedRead
from tests.fixtures.streams import chunks_of
from tests.storage.conftest import BLOCK, FlipByte

needs_nowait = pytest.mark.skipif(
    not hasattr(os, "RWF_NOWAIT"), reason="preadv2 RWF_NOWAIT is Linux's; elsewhere every read is blocking"
)


@pytest.fixture(params=["memory", "local", "local-remembering"])
async def store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[MemoryBlobStore | LocalBlobStore]:
    url = "memory://" if request.param == "memory" else f"file://{tmp_path / 'store'}"
    remember = 60.0 if request.param == "local-remembering" else 0.0
    opened = open_blob_store(url, block_size=BLOCK, io_threads=4, verified_block_seconds=remember)
    assert isinstance(opened, MemoryBlobStore | LocalBlobStore)
    assert isinstance(opened, SupportsCachedRead)
    yield opened
    await opened.close()


def drop_from_page_cache(store: LocalBlobStore, blob: BlobInfo) -> None:
    """Ask the kernel to forget the file's pages (they are clean: the store fsynced them)."""
    fd = os.open(store.local_path(blob), os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def cached_read_waits(store: LocalBlobStore, blob: BlobInfo, offset: int, length: int) -> bool:
    """Drop the file's pages and try ``read_cached``: whether it refused. The kernel may keep a page that is
    still being written back, so the drop is asked again a few times."""
    for _ in range(50):
        drop_from_page_cache(store, blob)
        try:
            store.read_cached(blob, offset, length)
        except WouldBlock:
            return True
        os.sync()
    return False


@needs_nowait
@pytest.mark.parametrize(
    ("offset", "length"),
    [
        (0, 3 * BLOCK + 100),  # everything
        (10, 100),  # inside the first block
        (BLOCK - 50, 100),  # across a block boundary
        (3 * BLOCK, 100),  # the short last block, whole
        (3 * BLOCK + 90, 1000),  # past the end: clamped
        (5, 0),  # empty
    ],
)
async def test_read_cached_gives_what_read_blocking_gives(
    store: MemoryBlobStore | LocalBlobStore, offset: int, length: int
) -> None:
    data = os.urandom(3 * BLOCK + 100)
    blob = await store.put(chunks_of(data))  # just written: in the page cache
    got = store.read_cached(blob, offset, length)
    assert got == data[offset : offset + length]
    assert store.read_blocking(blob, offset, length) == got
    assert store.read_cached(blob, offset, length) == got  # again, from blocks checked a moment ago


@needs_nowait
async def test_read_cached_refuses_a_range_touching_a_corrupt_block(
    store: MemoryBlobStore | LocalBlobStore, flip_byte: FlipByte
) -> None:
    data = os.urandom(3 * BLOCK)
    blob = await store.put(chunks_of(data))
    await flip_byte(store, blob.key, BLOCK + 17)
    with pytest.raises(Corruption) as caught:
        store.read_cached(blob, BLOCK + 100, 10)
    assert caught.value.details == {"chunk": 1}
    assert store.read_cached(blob, 2 * BLOCK + 5, 100) == data[2 * BLOCK + 5 :][:100]


@needs_nowait
async def test_read_cached_of_a_missing_object_is_not_found(store: MemoryBlobStore | LocalBlobStore) -> None:
    blob = await store.put(chunks_of(b"gone soon"))
    await store.delete(blob.key)
    with pytest.raises(NotFound):
        store.read_cached(blob, 0, 4)


@needs_nowait
async def test_read_cached_of_a_truncated_file_leaves_the_verdict_to_the_blocking_read(
    tmp_path: Path,
) -> None:
    # A short count from RWF_NOWAIT may mean "not cached" as well as "not there": the blocking read decides.
    store = LocalBlobStore(tmp_path / "store", block_size=BLOCK)
    data = os.urandom(2 * BLOCK)
    blob = await store.put(chunks_of(data))
    os.truncate(store.local_path(blob), BLOCK + 10)
    assert store.read_cached(blob, 0, 100) == data[:100]
    with pytest.raises(WouldBlock):
        store.read_cached(blob, BLOCK, 100)
    with pytest.raises(Corruption):
        store.read_blocking(blob, BLOCK, 100)


@needs_nowait
@pytest.mark.parametrize("remember", [0.0, 60.0])
async def test_read_cached_does_not_wait_for_the_disk(tmp_path: Path, remember: float) -> None:
    store = LocalBlobStore(tmp_path / "store", block_size=BLOCK, verified_block_seconds=remember)
    data = os.urandom(3 * BLOCK)
    blob = await store.put(chunks_of(data))
    # Remembering: the block is trusted, so the cached read asks the page cache for the span alone.
    assert store.read_blocking(blob, BLOCK + 10, 100) == data[BLOCK + 10 :][:100]
    assert cached_read_waits(store, blob, BLOCK + 10, 100), "a read of dropped pages did not refuse"
    assert store.read_blocking(blob, BLOCK + 10, 100) == data[BLOCK + 10 :][:100]  # reads them back in
    assert store.read_cached(blob, BLOCK + 10, 100) == data[BLOCK + 10 :][:100]


async def test_memory_never_waits(tmp_path: Path) -> None:
    store = MemoryBlobStore(block_size=BLOCK)
    data = os.urandom(BLOCK + 1)
    blob = await store.put(chunks_of(data))
    assert store.read_cached(blob, BLOCK - 1, 2) == data[BLOCK - 1 :]


@needs_nowait
@pytest.mark.parametrize("code", [errno.EAGAIN, errno.EOPNOTSUPP, errno.ENOSYS])
async def test_a_page_cache_read_the_system_cannot_make_falls_back_to_the_blocking_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    # EOPNOTSUPP: a file system without RWF_NOWAIT; ENOSYS: a kernel without preadv2.
    store = LocalBlobStore(tmp_path / "store", block_size=BLOCK)
    blob = await store.put(chunks_of(b"x" * 100))

    def refused(*args: object) -> int:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "preadv", refused)
    with pytest.raises(WouldBlock):
        store.read_cached(blob, 0, 10)
    assert store.read_blocking(blob, 0, 10) == b"x" * 10


@needs_nowait
async def test_a_failed_page_cache_read_is_a_storage_error_not_a_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalBlobStore(tmp_path / "store", block_size=BLOCK)
    blob = await store.put(chunks_of(b"x" * 100))

    def failed(*args: object) -> int:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "preadv", failed)
    with pytest.raises(BlobstoreError) as caught:
        store.read_cached(blob, 0, 10)
    assert not isinstance(caught.value, WouldBlock)
    assert str(tmp_path) not in str(caught.value)

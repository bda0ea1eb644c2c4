"""Blocks a read checked are trusted for a while on local disk: a read within that time reads only the bytes
it answers, and anything that changes the file, its digest or the time makes the next read check again."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from blobstore.config import Settings
from blobstore.digests import xxh3_hex
from blobstore.errors import Corruption
from blobstore.models import BlobInfo
from blobstore.runtime import blob_store_for
from blobstore.storage import LocalBlobStore
from blobstore.storage.integrity import read_verified_blocking
from blobstore.storage.verified_blocks import VerifiedBlocks
from tests.fixtures.streams import chunks_of
from tests.storage.conftest import BLOCK

IDENTITY = (1, 2, 3, 4, 5)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_checked_block_is_held_for_its_seconds_and_no_longer() -> None:
    clock = Clock()
    verified = VerifiedBlocks(60, clock=clock)
    assert not verified.holds(IDENTITY, 0, "d0")
    verified.add(IDENTITY, 0, "d0")
    assert verified.holds(IDENTITY, 0, "d0")
    clock.now += 59.9
    assert verified.holds(IDENTITY, 0, "d0")
    clock.now += 0.1
    assert not verified.holds(IDENTITY, 0, "d0")
    assert len(verified) == 0  # an expired block is forgotten when it is asked for


@pytest.mark.parametrize(
    ("identity", "index", "digest"),
    [
        ((1, 2, 3, 4, 6), 0, "d0"),  # the file's change time moved: it was written to
        ((1, 2, 4, 4, 5), 0, "d0"),  # another size
        ((1, 9, 3, 4, 5), 0, "d0"),  # another inode: the file was replaced
        (IDENTITY, 1, "d0"),  # another block
        (IDENTITY, 0, "d1"),  # the record now names another digest for the block
    ],
)
def test_a_block_is_held_only_for_the_same_file_index_and_digest(
    identity: tuple[int, int, int, int, int], index: int, digest: str
) -> None:
    verified = VerifiedBlocks(60)
    verified.add(IDENTITY, 0, "d0")
    assert not verified.holds(identity, index, digest)


def test_the_least_recently_used_blocks_go_first_past_the_capacity() -> None:
    verified = VerifiedBlocks(60, capacity=3)
    for index in range(3):
        verified.add(IDENTITY, index, f"d{index}")
    assert verified.holds(IDENTITY, 0, "d0")  # now the most recently used
    verified.add(IDENTITY, 3, "d3")
    assert len(verified) == 3
    assert [verified.holds(IDENTITY, index, f"d{index}") for index in range(4)] == [True, False, True, True]


@pytest.mark.parametrize("seconds", [0, -1])
def test_no_seconds_means_every_read_checks_every_block(seconds: float) -> None:
    assert not VerifiedBlocks(seconds).enabled


class Remembered:
    """A ``CheckedBlocks`` over bytes in memory that holds a given set of blocks."""

    def __init__(self, data: bytes, held: set[int]) -> None:
        self.data = data
        self.held = set(held)
        self.spans = 0

    def holds(self, index: int) -> bool:
        return index in self.held

    def add(self, index: int) -> None:
        self.held.add(index)

    def read_span(self, offset: int, length: int) -> bytes:
        self.spans += 1
        return self.data[offset : offset + length]


def blob_of(data: bytes, block: int) -> BlobInfo:
    digests = tuple(xxh3_hex(data[i : i + block]) for i in range(0, len(data), block))
    return BlobInfo("k", len(data), "0" * 64, block, digests)


@given(
    size=st.integers(0, 40),
    offset=st.integers(0, 45),
    length=st.integers(0, 45),
    held=st.sets(st.integers(0, 9)),
)
def test_remembered_blocks_give_the_same_bytes_as_checked_ones(
    size: int, offset: int, length: int, held: set[int]
) -> None:
    data = bytes(range(size))
    blob = blob_of(data, 4)

    def read_block(index: int) -> bytes:
        return data[index * 4 : index * 4 + 4]

    checked = Remembered(data, held)
    assert read_verified_blocking(blob, offset, length, read_block, checked) == data[offset : offset + length]
    end = min(offset + length, size)
    touched = set(range(offset // 4, (end - 1) // 4 + 1)) if offset < end else set()
    assert touched <= checked.held  # every block read whole is remembered


def test_a_remembered_span_that_comes_back_short_is_corruption() -> None:
    data = bytes(range(12))
    blob = blob_of(data, 4)
    checked = Remembered(data[:6], {1})
    with pytest.raises(Corruption) as caught:
        read_verified_blocking(blob, 5, 3, lambda index: data[index * 4 : index * 4 + 4], checked)
    assert caught.value.details == {"chunk": 1}


def spy_on_preads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    lengths: list[int] = []
    real: Callable[[int, int, int], bytes] = os.pread

    def pread(fd: int, length: int, offset: int) -> bytes:
        lengths.append(length)
        return real(fd, length, offset)

    monkeypatch.setattr("blobstore.storage.local.os.pread", pread)
    return lengths


async def test_a_second_read_of_a_checked_block_reads_only_the_bytes_it_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalBlobStore(tmp_path / "store", block_size=BLOCK, verified_block_seconds=60)
    clock = Clock()
    store.verified_blocks = VerifiedBlocks(60, clock=clock)
    data = os.urandom(3 * BLOCK)
    blob = await store.put(chunks_of(data))
    preads = spy_on_preads(monkeypatch)

    assert store.read_blocking(blob, BLOCK + 100, 4096) == data[BLOCK + 100 :][:4096]
    assert preads == [BLOCK]  # the whole block, checked
    assert store.read_blocking(blob, BLOCK + 5000, 4096) == data[BLOCK + 5000 :][:4096]
    assert preads == [BLOCK, 4096]  # the span alone
    assert store.read_blocking(blob, BLOCK - 10, 20) == data[BLOCK - 10 :][:20]
    assert preads == [BLOCK, 4096, BLOCK, 10]  # block 0 checked, block 1 remembered

    clock.now += 60
    assert store.read_blocking(blob, BLOCK + 5000, 4096) == data[BLOCK + 5000 :][:4096]
    assert preads[-1] == BLOCK  # the minute is over: checked again


async def test_a_file_written_to_after_its_check_is_checked_again(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path / "store", block_size=BLOCK, verified_block_seconds=60)
    data = os.urandom(2 * BLOCK)
    blob = await store.put(chunks_of(data))
    assert store.read_blocking(blob, 10, 100) == data[10:110]
    path = store.local_path(blob)
    before = path.stat()
    with path.open("r+b") as handle:
        handle.seek(50)
        handle.write(bytes([data[50] ^ 0xFF]))
    # The change time moves with any write; the clock's tick is coarse, so make the move certain here.
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
    with pytest.raises(Corruption) as caught:
        store.read_blocking(blob, 10, 100)
    assert caught.value.details == {"chunk": 0}


async def test_a_block_that_fails_its_check_is_not_remembered(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path / "store", block_size=BLOCK, verified_block_seconds=60)
    data = os.urandom(BLOCK)
    blob = await store.put(chunks_of(data))
    with store.local_path(blob).open("r+b") as handle:
        handle.seek(7)
        handle.write(bytes([data[7] ^ 0xFF]))
    for _ in range(2):
        with pytest.raises(Corruption):
            store.read_blocking(blob, 0, 10)
    assert len(store.verified_blocks) == 0


@pytest.mark.parametrize(("env", "enabled"), [({}, True), ({"BLOBSTORE_VERIFIED_BLOCK_SECONDS": "0"}, False)])
def test_the_server_trusts_checked_blocks_for_a_minute_unless_told_not_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str], enabled: bool
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    store = blob_store_for(Settings(data_dir=tmp_path / "data"))
    assert isinstance(store, LocalBlobStore)
    assert store.verified_blocks.enabled is enabled
    assert store.verified_blocks.seconds == (60 if enabled else 0)

"""SHA-256 of a large piece on a hashing thread while the caller writes it: same digests, errors kept."""

from __future__ import annotations

import hashlib
import itertools
import os
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blobstore import hash_threads
from blobstore.digests import ChunkHasher, HashingWriter, xxh3_hex
from blobstore.errors import ChunkSizeInvalid, TooLarge
from blobstore.hash_threads import ALONGSIDE_MIN, hashed_alongside
from tests.fixtures.processes import in_forked_child

LARGE = ALONGSIDE_MIN * 3 + 17


class _Recording:
    """A hasher that notes the thread each piece was hashed on."""

    def __init__(self) -> None:
        self.sha = hashlib.sha256()
        self.threads: list[str] = []

    def update(self, data: bytes | bytearray | memoryview, /) -> None:
        self.threads.append(threading.current_thread().name)
        self.sha.update(data)


def test_a_large_piece_is_hashed_on_a_hashing_thread_and_done_when_the_block_is_left() -> None:
    hasher = _Recording()
    data = os.urandom(LARGE)
    with hashed_alongside(hasher, data):
        pass
    assert hasher.threads
    assert hasher.threads[0].startswith("blobstore-sha256")
    assert hasher.sha.hexdigest() == hashlib.sha256(data).hexdigest()


def test_a_small_piece_is_hashed_in_the_callers_thread() -> None:
    hasher = _Recording()
    with hashed_alongside(hasher, b"small"):
        pass
    assert hasher.threads == [threading.current_thread().name]


def test_an_error_of_the_block_is_raised_after_the_hash_is_finished() -> None:
    started = threading.Event()
    finished = threading.Event()

    class Slow:
        def update(self, data: bytes | bytearray | memoryview, /) -> None:
            started.set()
            threading.Event().wait(0.2)
            finished.set()

    def write_fails() -> None:
        with hashed_alongside(Slow(), bytes(LARGE)):
            started.wait(5)
            raise OSError("disk")

    with pytest.raises(OSError, match="disk"):
        write_fails()
    assert finished.is_set()


def test_an_error_of_the_hash_reaches_the_caller() -> None:
    class Broken:
        def update(self, data: bytes | bytearray | memoryview, /) -> None:
            raise MemoryError

    with pytest.raises(MemoryError), hashed_alongside(Broken(), bytes(LARGE)):
        pass


def test_a_forked_child_makes_its_own_hashing_threads() -> None:
    with hashed_alongside(hashlib.sha256(), bytes(LARGE)):
        pass
    parent = hash_threads._POOL.get()

    def in_child() -> bytes:
        digest = hashlib.sha256()
        with hashed_alongside(digest, bytes(LARGE)):
            pass
        own = hash_threads._POOL.get() is not parent
        return b"1" if own and digest.digest() == hashlib.sha256(bytes(LARGE)).digest() else b"0"

    assert in_forked_child(in_child) == b"1"
    assert hash_threads._POOL.get() is parent


@settings(max_examples=25, deadline=None)
@given(
    sizes=st.lists(st.sampled_from([0, 1, 1000, ALONGSIDE_MIN - 1, ALONGSIDE_MIN, LARGE]), max_size=5),
    block=st.sampled_from([4096, 1024 * 1024]),
)
def test_a_writer_fed_while_writing_gives_the_digests_of_one_pass(sizes: list[int], block: int) -> None:
    data = os.urandom(sum(sizes))
    writer = HashingWriter(block_size=block)
    chunk = ChunkHasher()
    written = bytearray()
    cuts = [0, *itertools.accumulate(sizes)]
    for start, end in itertools.pairwise(cuts):
        piece = memoryview(data)[start:end]
        with writer.updating(piece), chunk.updating(piece):
            written += piece
    assert bytes(written) == data
    digest = writer.finish()
    assert digest.size == len(data)
    assert digest.sha256 == hashlib.sha256(data).hexdigest()
    assert digest.block_xxh3 == tuple(xxh3_hex(data[i : i + block]) for i in range(0, len(data), block))
    whole = chunk.finish()
    assert (whole.size, whole.sha256, whole.xxh3) == (len(data), digest.sha256, xxh3_hex(data))


def test_a_piece_past_the_limit_is_refused_before_the_block_runs() -> None:
    writer = HashingWriter(max_size=LARGE - 1)
    ran = False
    with pytest.raises(TooLarge), writer.updating(bytes(LARGE)):
        ran = True
    assert not ran
    assert writer.size == 0
    chunk = ChunkHasher(max_length=10)
    with pytest.raises(ChunkSizeInvalid), chunk.updating(bytes(11)):
        ran = True
    assert not ran
    assert chunk.size == 0

"""Digest helpers and the hashing writer."""

from __future__ import annotations

import hashlib
import itertools

import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from blobstore.digests import (
    ChunkHasher,
    HashingWriter,
    is_hex_digest,
    normalize_sha256,
    normalize_xxh3,
    sha256_hex,
    xxh3_hex,
)
from blobstore.errors import (
    ChecksumMismatch,
    ChunkSizeInvalid,
    DigestMismatch,
    InvalidRequest,
    SizeMismatch,
    TooLarge,
)

EMPTY_SHA = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def test_helpers_match_the_reference_implementations() -> None:
    assert sha256_hex(b"") == EMPTY_SHA
    assert xxh3_hex(b"abc") == xxhash.xxh3_128_hexdigest(b"abc")
    assert len(xxh3_hex(b"abc")) == 32


@pytest.mark.parametrize(
    "value", [EMPTY_SHA, f"sha256:{EMPTY_SHA}", f"SHA256:{EMPTY_SHA.upper()}", f" {EMPTY_SHA} "]
)
def test_normalize_sha256_accepts_bare_and_prefixed_hex(value: str) -> None:
    assert normalize_sha256(value) == EMPTY_SHA


@pytest.mark.parametrize(
    "value",
    ["", "sha256:", EMPTY_SHA[:-1], EMPTY_SHA + "0", "md5:" + EMPTY_SHA, "z" * 64, f"sha-256:{EMPTY_SHA}"],
)
def test_normalize_sha256_refuses_anything_else(value: str) -> None:
    with pytest.raises(InvalidRequest):
        normalize_sha256(value)


def test_normalize_sha256_refuses_non_strings() -> None:
    with pytest.raises(InvalidRequest):
        normalize_sha256(123)  # type: ignore[arg-type]


def test_normalize_xxh3() -> None:
    assert normalize_xxh3("AB" * 16) == "ab" * 16
    with pytest.raises(InvalidRequest):
        normalize_xxh3("ab" * 8)


def test_is_hex_digest() -> None:
    assert is_hex_digest(EMPTY_SHA)
    assert not is_hex_digest(EMPTY_SHA.upper())
    assert is_hex_digest("ab" * 16, 32)
    assert not is_hex_digest(None)


@settings(max_examples=60, deadline=None)
@given(
    data=st.binary(max_size=300), splits=st.lists(st.integers(0, 300), max_size=6), chunk=st.integers(1, 64)
)
def test_writer_digests_do_not_depend_on_how_the_stream_is_split(
    data: bytes, splits: list[int], chunk: int
) -> None:
    writer = HashingWriter(block_size=chunk)
    cuts = sorted({0, len(data), *(min(s, len(data)) for s in splits)})
    for start, end in itertools.pairwise(cuts):
        writer.update(data[start:end])
    digest = writer.finish()
    assert digest.size == len(data)
    assert digest.sha256 == hashlib.sha256(data).hexdigest()
    assert digest.block_xxh3 == tuple(xxh3_hex(data[i : i + chunk]) for i in range(0, len(data), chunk))


def test_writer_refuses_bytes_past_max_size_before_hashing_them() -> None:
    writer = HashingWriter(max_size=10)
    writer.update(b"x" * 10)
    with pytest.raises(TooLarge):
        writer.update(b"y")
    assert writer.size == 10


def test_writer_refuses_a_stream_longer_than_declared_early() -> None:
    writer = HashingWriter(expected_size=3)
    with pytest.raises(SizeMismatch):
        writer.update(b"abcd")


def test_writer_refuses_a_stream_shorter_than_declared_at_finish() -> None:
    writer = HashingWriter(expected_size=5)
    writer.update(b"abc")
    with pytest.raises(SizeMismatch):
        writer.finish()


def test_writer_checks_a_size_claimed_at_finish() -> None:
    writer = HashingWriter()
    writer.update(b"abc")
    with pytest.raises(SizeMismatch):
        writer.finish(expected_size=4)
    assert writer.finish(expected_size=3).size == 3


def test_writer_checks_the_claimed_digest() -> None:
    writer = HashingWriter()
    writer.update(b"abc")
    with pytest.raises(DigestMismatch):
        writer.finish(expected_sha256=EMPTY_SHA)
    right = HashingWriter()
    right.update(b"abc")
    assert right.finish(expected_sha256=f"sha256:{sha256_hex(b'abc')}").sha256 == sha256_hex(b"abc")


def test_writer_refuses_a_zero_block_size() -> None:
    with pytest.raises(ValueError, match="block_size"):
        HashingWriter(block_size=0)


def test_chunk_hasher_checks_length_and_checksums() -> None:
    hasher = ChunkHasher(expected_length=3)
    hasher.update(b"abc")
    digest = hasher.finish(expected_sha256=sha256_hex(b"abc"), expected_xxh3=xxh3_hex(b"abc"))
    assert (digest.size, digest.sha256, digest.xxh3) == (3, sha256_hex(b"abc"), xxh3_hex(b"abc"))
    short = ChunkHasher(expected_length=3)
    short.update(b"ab")
    with pytest.raises(ChunkSizeInvalid):
        short.finish()
    with pytest.raises(ChunkSizeInvalid):
        ChunkHasher(max_length=2).update(b"abc")
    for claim in ({"expected_sha256": EMPTY_SHA}, {"expected_xxh3": xxh3_hex(b"")}):
        wrong = ChunkHasher()
        wrong.update(b"abc")
        with pytest.raises(ChecksumMismatch):
            wrong.finish(**claim)


@given(data=st.binary(max_size=5000), cut=st.integers(min_value=0, max_value=5000))
def test_a_writer_going_on_from_another_gives_the_digests_of_one_pass(data: bytes, cut: int) -> None:
    whole = HashingWriter(block_size=1000)
    whole.update(data)
    first = HashingWriter(block_size=1000)
    first.update(data[:cut])
    second = HashingWriter(block_size=1000, expected_size=len(data))
    second.continue_from(first)
    second.update(data[cut:])
    assert second.finish() == whole.finish()


def test_a_writer_refuses_to_go_on_from_too_much_or_another_block_size() -> None:
    seen = HashingWriter(block_size=1000)
    seen.update(b"x" * 10)
    with pytest.raises(SizeMismatch):
        HashingWriter(block_size=1000, expected_size=5).continue_from(seen)
    with pytest.raises(ValueError, match="block sizes"):
        HashingWriter(block_size=500).continue_from(seen)

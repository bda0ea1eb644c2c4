"""The block digests read back from the metadata: a sequence read on demand that behaves as the tuple."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from blobstore.models import BlobInfo, BlockDigests

digests = st.lists(st.binary(min_size=16, max_size=16).map(bytes.hex), max_size=40).map(tuple)


@given(digests, st.integers(min_value=-45, max_value=45))
def test_block_digests_index_like_the_tuple_they_were_joined_from(
    expected: tuple[str, ...], index: int
) -> None:
    blocks = BlockDigests(",".join(expected))

    assert len(blocks) == len(expected)
    assert list(blocks) == list(expected)
    assert blocks[1:3] == expected[1:3]
    if -len(expected) <= index < len(expected):
        assert blocks[index] == expected[index]
    else:
        with pytest.raises(IndexError):
            blocks[index]


@given(digests, digests)
def test_block_digests_equal_and_hash_as_the_tuple(first: tuple[str, ...], second: tuple[str, ...]) -> None:
    blocks = BlockDigests(",".join(first))

    assert blocks == first
    assert first == blocks
    assert hash(blocks) == hash(first)
    assert (blocks == second) is (first == second)
    assert (blocks == BlockDigests(",".join(second))) is (first == second)
    info = BlobInfo("k", 1, "0" * 64, 4, first)
    assert BlobInfo("k", 1, "0" * 64, 4, blocks) == info
    assert hash(BlobInfo("k", 1, "0" * 64, 4, blocks)) == hash(info)


def test_block_digests_are_not_equal_to_a_string() -> None:
    text = "0" * 32
    assert BlockDigests(text) != text
    assert BlockDigests(text) == (text,)


@pytest.mark.parametrize(
    "text", ["abc", "0" * 32 + ",12", "0" * 33, "0" * 32 + ",", "0" * 31 + "," + "1" * 33, "0" * 65]
)
def test_block_digests_of_another_width_are_refused_and_parse_splits_them(text: str) -> None:
    with pytest.raises(ValueError, match="32 hex digits"):
        BlockDigests(text)

    assert BlockDigests.parse(text) == tuple(text.split(","))


def test_parse_of_fixed_width_text_reads_on_demand() -> None:
    text = ",".join(f"{i:032x}" for i in range(1024))

    parsed = BlockDigests.parse(text)

    assert isinstance(parsed, BlockDigests)
    assert parsed[1000] == f"{1000:032x}"
    assert parsed[-1] == f"{1023:032x}"

"""Chunk bookkeeping: which chunks exist, their lengths, and what completion accepts."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from blobstore.chunk_plan import ChunkPlan
from blobstore.errors import ChunkIndexOutOfRange, InvalidRequest, SizeMismatch, UploadIncomplete
from blobstore.models import ChunkRecord

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def records(sizes: dict[int, int]) -> list[ChunkRecord]:
    return [ChunkRecord("u", index, size, "0" * 64, "0" * 32, NOW) for index, size in sizes.items()]


@given(size=st.integers(0, 10_000), chunk=st.integers(1, 1_000))
def test_expected_lengths_tile_the_declared_size_exactly(size: int, chunk: int) -> None:
    plan = ChunkPlan(chunk, size)
    lengths = [plan.expected_length(i) for i in range(plan.count or 0)]
    assert sum(length or 0 for length in lengths) == size
    assert all(length == chunk for length in lengths[:-1])
    with pytest.raises(ChunkIndexOutOfRange):
        plan.expected_length(plan.count or 0)


@given(size=st.integers(1, 5_000), chunk=st.integers(1, 500), data=st.data())
def test_missing_lists_exactly_the_indexes_not_received(size: int, chunk: int, data: st.DataObject) -> None:
    plan = ChunkPlan(chunk, size)
    count = plan.count or 0
    have = data.draw(st.sets(st.integers(0, count - 1)))
    assert plan.missing(have) == sorted(set(range(count)) - have)


@given(size=st.integers(1, 5_000), chunk=st.integers(1, 500), data=st.data())
def test_completion_accepts_only_the_full_set_of_chunks(size: int, chunk: int, data: st.DataObject) -> None:
    plan = ChunkPlan(chunk, size)
    count = plan.count or 0
    full = {i: plan.expected_length(i) or 0 for i in range(count)}
    assert plan.check_complete(records(full)) == size
    dropped = data.draw(st.integers(0, count - 1))
    partial = {i: n for i, n in full.items() if i != dropped}
    with pytest.raises(UploadIncomplete) as caught:
        plan.check_complete(records(partial))
    assert dropped in caught.value.details["missing"]


def test_undeclared_size_accepts_a_short_last_chunk_only() -> None:
    plan = ChunkPlan(10, None)
    assert plan.expected_length(5) is None
    assert plan.check_complete(records({0: 10, 1: 10, 2: 3})) == 23
    with pytest.raises(InvalidRequest):
        plan.check_complete(records({0: 10, 1: 4, 2: 10}))
    with pytest.raises(UploadIncomplete):
        plan.check_complete(records({0: 10, 2: 3}))
    assert plan.missing(set()) is None
    assert plan.missing({0, 3}) == [1, 2]


def test_declared_size_mismatch_is_refused_even_when_chunks_are_contiguous() -> None:
    plan = ChunkPlan(10, 25)
    with pytest.raises(SizeMismatch):
        plan.check_complete(records({0: 10, 1: 10, 2: 4}))

"""Hypothesis fuzzing of the parsers that see raw client input (Range headers, store URIs, ids) and of the
chunk bookkeeping: hostile input raises only catalogue errors, and accepted input means what a model says."""

from __future__ import annotations

import hashlib
import itertools
import random
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from blobstore.chunk_plan import ChunkPlan
from blobstore.config import Settings
from blobstore.errors import (
    BlobstoreError,
    ChecksumMismatch,
    ChunkIndexOutOfRange,
    ChunkSizeInvalid,
    InvalidRange,
    InvalidRequest,
    NotFound,
    RangeNotSatisfiable,
    SizeMismatch,
    UploadIncomplete,
)
from blobstore.ids import check_id, new_artifact_id, new_upload_id
from blobstore.models import ARTIFACT_URI_PREFIX, Caller, ChunkRecord
from blobstore.ranges import ByteRange, RangeSpec, coalesce, parse_range_header, resolve_ranges, window
from blobstore.runtime import open_service
from mcp_resources.uris import parse_store_uri, window_uri

RANGE_ALPHABET = st.sampled_from(
    [*list("bytes=-,0123456789 \t;a"), "bytes=", "\x00", "é", "99999999999999999999"]
)
hostile_range = st.lists(RANGE_ALPHABET, max_size=40).map("".join) | st.text(max_size=60)


@given(hostile_range)
def test_range_parser_accepts_or_raises_invalid_range_only(value: str) -> None:
    try:
        specs = parse_range_header(value)
    except InvalidRange:
        return
    if specs is None:
        assert value.partition("=")[0].strip().lower() != "bytes"
        return
    assert specs
    for spec in specs:
        assert spec.first is not None or spec.last is not None
        if spec.first is not None and spec.last is not None:
            assert spec.first <= spec.last


spec_strategy = st.one_of(
    st.tuples(st.integers(0, 3000), st.none()).map(lambda t: RangeSpec(t[0], None)),
    st.tuples(st.integers(0, 3000), st.integers(0, 3000)).map(lambda t: RangeSpec(min(t), max(t))),
    st.integers(0, 3000).map(lambda n: RangeSpec(None, n)),
)


def render(spec: RangeSpec) -> str:
    if spec.first is None:
        return f"-{spec.last}"
    return f"{spec.first}-" + ("" if spec.last is None else str(spec.last))


def model_bytes(spec: RangeSpec, size: int) -> set[int]:
    if spec.first is None:
        assert spec.last is not None
        return set(range(max(0, size - spec.last), size)) if spec.last else set()
    last = size - 1 if spec.last is None else min(spec.last, size - 1)
    return set(range(spec.first, last + 1))


@given(
    st.lists(spec_strategy, min_size=1, max_size=12), st.integers(0, 2500), st.sampled_from([",", ", ", " ,"])
)
def test_ranges_round_trip_and_resolve_like_the_model(specs: list[RangeSpec], size: int, sep: str) -> None:
    header = "bytes=" + sep.join(render(s) for s in specs)
    assert parse_range_header(header) == specs
    wanted = set().union(*(model_bytes(s, size) for s in specs))
    try:
        resolved = resolve_ranges(specs, size)
    except RangeNotSatisfiable:
        assert not wanted
        return
    merged = coalesce(resolved)
    covered = set().union(*(set(range(r.start, r.end)) for r in merged))
    assert covered == wanted
    assert all(0 <= r.start < r.end <= size for r in merged)
    assert all(a.end < b.start for a, b in itertools.pairwise(merged))


@given(
    st.integers(-5, 5000) | st.none(),
    st.integers(-5, 5000) | st.none(),
    st.integers(0, 4000),
    st.integers(1, 2048),
)
def test_windows_stay_inside_the_artifact_and_the_window_maximum(
    offset: int | None, length: int | None, size: int, max_window: int
) -> None:
    try:
        win = window(offset, length, size, max_window)
    except (InvalidRange, RangeNotSatisfiable):
        assert (offset or 0) < 0 or (length is not None and length <= 0) or (offset or 0) > size
        return
    assert 0 <= win.offset <= size
    assert 0 <= win.length <= max_window
    assert win.end <= size
    if length is not None:
        assert win.length <= length


uri_text = st.one_of(
    st.text(max_size=80),
    st.builds(lambda s: ARTIFACT_URI_PREFIX + s, st.text(max_size=80)),
    st.builds(
        lambda i, q: f"{ARTIFACT_URI_PREFIX}{i}?{q}",
        st.sampled_from([new_artifact_id(), "..", "a%2F..", "x/y", ""]),
        st.lists(
            st.sampled_from(["offset=1", "length=5", "offset=-1", "length=", "x=1", "offset=%31", "&"])
        ).map("&".join),
    ),
)


@given(uri_text)
def test_store_uri_parser_names_an_id_or_nothing_or_raises_a_catalogue_error(uri: str) -> None:
    try:
        ref = parse_store_uri(uri)
    except InvalidRequest:  # InvalidRange is one
        return
    if ref is None:
        return
    assert ref.artifact_id
    assert "/" not in ref.artifact_id
    assert "%" not in ref.artifact_id
    assert "?" not in ref.artifact_id
    assert ref.offset is None or ref.offset >= 0
    assert ref.length is None or ref.length >= 0
    # Whatever the parser lets through, the service's id check is the gate before any lookup.
    try:
        check_id(ref.artifact_id)
    except NotFound:
        return
    assert ref.artifact_id.replace("_", "").replace("-", "").isalnum()


@given(st.integers(0, 10**12), st.integers(1, 10**9))
def test_window_uris_parse_back_to_their_window(offset: int, length: int) -> None:
    artifact_id = new_artifact_id()
    ref = parse_store_uri(window_uri(artifact_id, offset, length))
    assert ref is not None
    assert (ref.artifact_id, ref.offset, ref.length, ref.has_window) == (artifact_id, offset, length, True)


@given(st.text(max_size=120))
def test_id_check_admits_only_plain_ids(value: str) -> None:
    try:
        checked = check_id(value)
    except NotFound:
        return
    assert checked == value
    assert all(ch.isascii() and (ch.isalnum() or ch in "_-") for ch in value)


def test_minted_ids_pass_the_check_and_are_unique() -> None:
    ids = [new_artifact_id() for _ in range(500)] + [new_upload_id() for _ in range(500)]
    assert len(set(ids)) == 1000
    assert all(check_id(i) == i for i in ids)


# -- chunk bookkeeping ------------------------------------------------------------------------------------


def record(index: int, size: int) -> ChunkRecord:
    from datetime import UTC, datetime

    return ChunkRecord("u", index, size, "0" * 64, "0" * 32, datetime.now(UTC))


@given(st.integers(1, 64), st.integers(0, 2000), st.data())
def test_chunk_plan_tiles_the_declared_size_exactly(chunk_size: int, size: int, data: st.DataObject) -> None:
    plan = ChunkPlan(chunk_size, size)
    count = plan.count or 0
    lengths = [plan.expected_length(i) for i in range(count)]
    assert sum(length or 0 for length in lengths) == size
    assert all(length is not None and 0 < length <= chunk_size for length in lengths) or size == 0
    with pytest.raises(ChunkIndexOutOfRange):
        plan.expected_length(count)
    have = data.draw(st.sets(st.integers(0, max(count - 1, 0)), max_size=count))
    missing = plan.missing(have)
    assert missing == sorted(set(range(count)) - have)
    chunks = [record(i, lengths[i] or 0) for i in sorted(have)]
    if missing:
        with pytest.raises(UploadIncomplete):
            plan.check_complete(chunks)
    else:
        assert plan.check_complete(chunks) == size


@given(st.integers(1, 64), st.lists(st.integers(1, 64), min_size=1, max_size=20))
def test_undeclared_uploads_complete_only_with_full_chunks_then_one_short(
    chunk_size: int, sizes: list[int]
) -> None:
    plan = ChunkPlan(chunk_size, None)
    chunks = [record(i, min(s, chunk_size)) for i, s in enumerate(sizes)]
    valid = all(c.size == chunk_size for c in chunks[:-1])
    if not valid:
        with pytest.raises((InvalidRequest, SizeMismatch)):
            plan.check_complete(chunks)
        return
    assert plan.check_complete(chunks) == sum(c.size for c in chunks)


class ChunkScenario:
    """A random interleaving of chunk PUTs (in any order, repeated, sometimes with wrong bytes or lengths)
    against the real upload manager; the model is the file itself."""

    def __init__(self, seed: int, size: int, chunk_size: int) -> None:
        self.rng = random.Random(seed)
        self.data = self.rng.randbytes(size)
        self.chunk_size = chunk_size

    def piece(self, index: int) -> bytes:
        return self.data[index * self.chunk_size : (index + 1) * self.chunk_size]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 10**6), st.integers(0, 300), st.integers(16, 64))
def test_chunks_in_any_order_with_repeats_and_bad_bytes_complete_to_the_file(
    tmp_path: Path, seed: int, size: int, chunk_size: int
) -> None:
    assume(size // chunk_size < 40)
    scenario = ChunkScenario(seed, size, chunk_size)
    directory = tmp_path / f"s{seed}-{size}-{chunk_size}"
    settings_ = Settings(
        data_dir=directory,
        storage_url="memory://",
        min_chunk_size=16,
        default_chunk_size=64,
        max_chunk_size=64,
    )

    async def run() -> None:
        caller = Caller(namespace="fuzz")
        async with open_service(settings_) as service:
            session = await service.uploads.begin(caller, name="f.bin", size=size, chunk_size=chunk_size)
            count = ChunkPlan(chunk_size, size).count or 0
            order = [scenario.rng.randrange(max(count, 1)) for _ in range(count * 2)] + list(range(count))
            scenario.rng.shuffle(order)
            for index in order:
                good = scenario.piece(index)
                roll = scenario.rng.random()
                if roll < 0.15 and good:
                    # Wrong bytes with the right checksum claim: refused, and nothing is recorded.
                    bad = bytes([good[0] ^ 1]) + good[1:]
                    claim = hashlib.sha256(good).hexdigest()
                    with pytest.raises(ChecksumMismatch):
                        await service.uploads.put_chunk(caller, session.id, index, _one(bad), sha256=claim)
                    continue
                if roll < 0.25:
                    with pytest.raises((ChunkSizeInvalid, ChunkIndexOutOfRange)):
                        await service.uploads.put_chunk(caller, session.id, index, _one(good + b"+"))
                    continue
                try:
                    await service.uploads.put_chunk(caller, session.id, index, _one(good))
                except BlobstoreError as exc:
                    raise AssertionError(f"good chunk {index} refused: {exc.code}") from exc
            # A last pass: every chunk arrives once more with its right bytes (resends are idempotent).
            for index in range(count):
                await service.uploads.put_chunk(caller, session.id, index, _one(scenario.piece(index)))
            status = await service.uploads.status(caller, session.id)
            assert status.missing == []
            artifact = await service.uploads.complete(caller, session.id)
            _art, blob = await service.open_artifact(caller, artifact.id)
            stored = b"".join([piece async for piece in service.stream(blob)])
            assert stored == scenario.data

    anyio.run(run)


async def _one(data: bytes) -> AsyncIterator[bytes]:
    yield data


def test_byte_range_content_range_is_inclusive() -> None:
    assert ByteRange(0, 10).content_range(10) == "bytes 0-9/10"

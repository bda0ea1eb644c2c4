"""The BlobStore contract, run unchanged against every backend."""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
import xxhash
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blobstore.errors import (
    ChecksumMismatch,
    ChunkConflict,
    ChunkSizeInvalid,
    Corruption,
    DigestMismatch,
    InvalidRequest,
    NotFound,
    SizeMismatch,
    TooLarge,
    UploadIncomplete,
)
from blobstore.models import BlobInfo, ChunkReceipt
from blobstore.storage import BlobStore
from blobstore.storage.keys import is_generation_key
from tests.storage.conftest import BLOCK, FlipByte, chunks_of, keys_of, read_all, staging_refs

RANGE_BLOB_SIZE = 3 * BLOCK + 4321


def payload(size: int, seed: int = 0) -> bytes:
    return bytes((i * 31 + seed * 7 + i // 251) % 256 for i in range(size))


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def xxh(data: bytes) -> str:
    return xxhash.xxh3_128_hexdigest(data)


# -- put / read ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "size",
    [0, 1, BLOCK, 3 * BLOCK + 777],
    ids=["empty", "one-byte", "one-chunk", "chunks+tail"],
)
async def test_put_then_read_returns_the_same_bytes(store: BlobStore, size: int) -> None:
    data = payload(size)
    blob = await store.put(chunks_of(data))
    assert blob.size == size
    assert blob.sha256 == sha(data)
    assert blob.block_size == BLOCK
    expected_chunks = [data[i : i + BLOCK] for i in range(0, size, BLOCK)]
    assert blob.block_xxh3 == tuple(xxh(c) for c in expected_chunks)
    assert is_generation_key(blob.key)
    assert await read_all(store, blob) == data
    assert await store.exists(blob.key)
    assert blob.key in await keys_of(store)


async def test_put_with_claimed_digest_lands_on_a_digest_key(store: BlobStore) -> None:
    data = payload(5000)
    blob = await store.put(chunks_of(data), expected_size=5000, expected_sha256=f"sha256:{sha(data)}")
    digest = sha(data)
    assert blob.key.startswith(f"blobs/{digest[:2]}/{digest[2:4]}/{digest}.")
    assert await read_all(store, blob) == data


@pytest.fixture
async def range_blob(store: BlobStore) -> tuple[BlobInfo, bytes]:
    data = os.urandom(RANGE_BLOB_SIZE)
    return await store.put(chunks_of(data, 7000)), data


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(offset=st.integers(0, RANGE_BLOB_SIZE), length=st.one_of(st.none(), st.integers(0, RANGE_BLOB_SIZE)))
async def test_any_range_reads_exactly_the_slice(
    store: BlobStore, range_blob: tuple[BlobInfo, bytes], offset: int, length: int | None
) -> None:
    blob, data = range_blob
    expected = data[offset:] if length is None else data[offset : offset + length]
    assert await read_all(store, blob, offset, length) == expected


async def test_range_reads_are_split_at_blocks(store: BlobStore) -> None:
    data = payload(2 * BLOCK + 10)
    blob = await store.put(chunks_of(data))
    parts = [part async for part in store.read(blob, 5, 2 * BLOCK)]
    assert [len(p) for p in parts] == [BLOCK - 5, BLOCK, 5]


async def test_negative_range_is_refused(store: BlobStore) -> None:
    blob = await store.put(chunks_of(b"abc"))
    with pytest.raises(InvalidRequest):
        await read_all(store, blob, -1, 2)


@pytest.mark.parametrize(("claimed", "error"), [(99, SizeMismatch), (101, SizeMismatch)])
async def test_wrong_expected_size_is_refused_and_nothing_stored(
    store: BlobStore, claimed: int, error: type[Exception]
) -> None:
    before = await keys_of(store)
    with pytest.raises(error):
        await store.put(chunks_of(payload(100)), expected_size=claimed)
    assert await keys_of(store) == before


async def test_wrong_expected_digest_is_refused_and_nothing_stored(store: BlobStore) -> None:
    data = payload(3 * BLOCK)
    with pytest.raises(DigestMismatch):
        await store.put(chunks_of(data), expected_sha256=sha(data + b"x"))
    assert await keys_of(store) == set()


async def test_stream_past_max_size_is_refused_and_nothing_stored(store: BlobStore) -> None:
    with pytest.raises(TooLarge):
        await store.put(chunks_of(payload(2 * BLOCK)), max_size=BLOCK)
    assert await keys_of(store) == set()


class SourceBroke(Exception):
    """The writer's own stream failing midway, as a dropped client connection does."""


async def breaking_after(data: bytes) -> AsyncIterator[bytes]:
    async for piece in chunks_of(data):
        yield piece
    raise SourceBroke()


async def test_a_put_whose_source_breaks_fails_with_that_error_and_stores_nothing(store: BlobStore) -> None:
    with pytest.raises(SourceBroke):
        await store.put(breaking_after(payload(3 * BLOCK)))
    assert await keys_of(store) == set()


async def test_malformed_digest_claim_is_refused(store: BlobStore) -> None:
    with pytest.raises(InvalidRequest):
        await store.put(chunks_of(b"abc"), expected_sha256="md5:abc")


async def test_concurrent_puts_of_identical_content_give_two_readable_generations(store: BlobStore) -> None:
    data = payload(2 * BLOCK + 3)
    blobs: list[BlobInfo] = []

    async def put_one() -> None:
        blobs.append(await store.put(chunks_of(data), expected_sha256=sha(data)))

    async with anyio.create_task_group() as group:
        group.start_soon(put_one)
        group.start_soon(put_one)
    first, second = blobs
    assert first.key != second.key
    assert first.sha256 == second.sha256 == sha(data)
    assert await keys_of(store) == {first.key, second.key}
    await store.delete(first.key)
    assert await read_all(store, second) == data


async def test_flipped_byte_fails_only_the_block_it_is_in(store: BlobStore, flip_byte: FlipByte) -> None:
    data = payload(3 * BLOCK)
    blob = await store.put(chunks_of(data))
    await flip_byte(store, blob.key, BLOCK + 17)
    with pytest.raises(Corruption) as caught:
        await read_all(store, blob, BLOCK + 100, 10)
    assert caught.value.details == {"chunk": 1}
    with pytest.raises(Corruption):
        await read_all(store, blob)
    assert await read_all(store, blob, 0, BLOCK) == data[:BLOCK]
    assert await read_all(store, blob, 2 * BLOCK + 5, 100) == data[2 * BLOCK + 5 :][:100]


async def test_corrupt_block_yields_none_of_its_bytes(store: BlobStore, flip_byte: FlipByte) -> None:
    data = payload(2 * BLOCK)
    blob = await store.put(chunks_of(data))
    await flip_byte(store, blob.key, 2 * BLOCK - 1)
    received: list[bytes] = []

    async def consume() -> None:
        async for part in store.read(blob):
            received.append(part)

    with pytest.raises(Corruption):
        await consume()
    assert received == [data[:BLOCK]]


async def test_reading_a_missing_object_is_not_found(store: BlobStore) -> None:
    blob = await store.put(chunks_of(b"gone soon"))
    await store.delete(blob.key)
    with pytest.raises(NotFound):
        await read_all(store, blob)


async def test_delete_is_idempotent(store: BlobStore) -> None:
    blob = await store.put(chunks_of(b"twice"))
    await store.delete(blob.key)
    await store.delete(blob.key)
    assert not await store.exists(blob.key)
    assert await keys_of(store) == set()


@pytest.mark.parametrize("key", ["../../etc/passwd", "/etc/passwd", "blobs/aa/bb/x\x00", "staging/u1/0", ""])
async def test_malformed_keys_are_refused(store: BlobStore, key: str) -> None:
    with pytest.raises(InvalidRequest):
        await store.delete(key)
    with pytest.raises(InvalidRequest):
        await store.exists(key)


async def test_check_passes_on_a_working_backend(store: BlobStore) -> None:
    await store.check()


async def test_sweep_temp_without_leftovers_removes_nothing(store: BlobStore) -> None:
    blob = await store.put(chunks_of(b"kept"))
    from datetime import UTC, datetime, timedelta

    assert await store.sweep_temp(datetime.now(UTC) + timedelta(minutes=1)) == 0
    assert await read_all(store, blob) == b"kept"


# -- staging -----------------------------------------------------------------------------------------------

UPLOAD_CHUNK = 50_000


async def stage(store: BlobStore, ref: str, index: int, data: bytes, **claims: Any) -> ChunkReceipt:
    return await store.stage_put(ref, index, chunks_of(data, 16_000), **claims)


async def test_chunks_staged_out_of_order_commit_to_the_right_bytes(store: BlobStore) -> None:
    data = payload(3 * UPLOAD_CHUNK + 1234, seed=3)
    pieces = [data[i : i + UPLOAD_CHUNK] for i in range(0, len(data), UPLOAD_CHUNK)]
    ref = await store.stage_begin("u_order", chunk_size=UPLOAD_CHUNK)
    receipts: dict[int, ChunkReceipt] = {}
    for index in (2, 0, 3, 1):
        receipts[index] = await stage(store, ref, index, pieces[index])
    assert receipts[3] == ChunkReceipt(3, len(pieces[3]), sha(pieces[3]), xxh(pieces[3]))
    progress: list[int] = []

    async def report(done: int) -> None:
        progress.append(done)

    blob = await store.stage_commit(
        ref,
        [receipts[i] for i in range(4)],
        expected_size=len(data),
        expected_sha256=sha(data),
        progress=report,
    )
    assert blob.size == len(data)
    assert blob.sha256 == sha(data)
    assert await read_all(store, blob) == data
    assert progress == sorted(progress)
    assert progress[-1] == len(data)
    assert blob.key in await keys_of(store)


async def test_commit_without_claims_still_records_the_digest(store: BlobStore) -> None:
    data = payload(UPLOAD_CHUNK + 10)
    ref = await store.stage_begin("u_noclaim", chunk_size=UPLOAD_CHUNK)
    first = await stage(store, ref, 0, data[:UPLOAD_CHUNK])
    second = await stage(store, ref, 1, data[UPLOAD_CHUNK:])
    blob = await store.stage_commit(ref, [first, second])
    assert blob.sha256 == sha(data)
    assert await read_all(store, blob, 3, UPLOAD_CHUNK) == data[3 : 3 + UPLOAD_CHUNK]


async def test_resending_the_same_bytes_returns_the_same_receipt(store: BlobStore) -> None:
    ref = await store.stage_begin("u_resend", chunk_size=UPLOAD_CHUNK)
    data = payload(UPLOAD_CHUNK)
    first = await stage(store, ref, 0, data)
    again = await stage(store, ref, 0, data)
    assert again == first


async def test_resending_different_bytes_conflicts_and_keeps_the_original(store: BlobStore) -> None:
    ref = await store.stage_begin("u_conflict", chunk_size=UPLOAD_CHUNK)
    original = payload(UPLOAD_CHUNK, seed=1)
    receipt = await stage(store, ref, 0, original)
    with pytest.raises(ChunkConflict):
        await stage(store, ref, 0, payload(UPLOAD_CHUNK, seed=2))
    blob = await store.stage_commit(ref, [receipt])
    assert await read_all(store, blob) == original


@pytest.mark.parametrize("length", [UPLOAD_CHUNK - 1, UPLOAD_CHUNK + 1])
async def test_chunk_of_the_wrong_length_is_refused_and_not_kept(store: BlobStore, length: int) -> None:
    ref = await store.stage_begin("u_length", chunk_size=UPLOAD_CHUNK)
    with pytest.raises(ChunkSizeInvalid):
        await stage(store, ref, 0, payload(length, seed=4), expected_length=UPLOAD_CHUNK)
    # Not kept: a different, correct chunk for the same index is accepted without a conflict.
    right = payload(UPLOAD_CHUNK, seed=5)
    receipt = await stage(store, ref, 0, right, expected_length=UPLOAD_CHUNK)
    assert receipt.size == UPLOAD_CHUNK


async def test_chunk_longer_than_max_length_is_refused(store: BlobStore) -> None:
    ref = await store.stage_begin("u_max", chunk_size=UPLOAD_CHUNK)
    with pytest.raises(ChunkSizeInvalid):
        await stage(store, ref, 0, payload(UPLOAD_CHUNK + 1), max_length=UPLOAD_CHUNK)
    receipt = await stage(store, ref, 0, payload(UPLOAD_CHUNK - 7, seed=9), max_length=UPLOAD_CHUNK)
    assert receipt.size == UPLOAD_CHUNK - 7


async def test_a_chunk_whose_source_breaks_fails_with_that_error_and_is_not_kept(store: BlobStore) -> None:
    ref = await store.stage_begin("u_broken", chunk_size=UPLOAD_CHUNK)
    with pytest.raises(SourceBroke):
        await store.stage_put(ref, 0, breaking_after(payload(UPLOAD_CHUNK, seed=6)))
    # Not kept: other bytes for the same index are accepted without a conflict.
    other = payload(UPLOAD_CHUNK, seed=7)
    receipt = await stage(store, ref, 0, other)
    assert receipt.sha256 == sha(other)


@pytest.mark.parametrize("algorithm", ["sha256", "xxh3"])
async def test_chunk_failing_its_checksum_is_refused_and_not_kept(store: BlobStore, algorithm: str) -> None:
    ref = await store.stage_begin("u_checksum", chunk_size=UPLOAD_CHUNK)
    data = payload(1000, seed=6)
    other = payload(1000, seed=7)
    claim = {"expected_sha256": sha(other)} if algorithm == "sha256" else {"expected_xxh3": xxh(other)}
    with pytest.raises(ChecksumMismatch):
        await stage(store, ref, 0, data, **claim)
    right = (
        {"expected_sha256": f"sha256:{sha(other)}"}
        if algorithm == "sha256"
        else {"expected_xxh3": xxh(other)}
    )
    assert (await stage(store, ref, 0, other, **right)).sha256 == sha(other)


async def test_commit_with_a_wrong_digest_publishes_nothing_and_keeps_the_chunks(store: BlobStore) -> None:
    data = payload(2 * UPLOAD_CHUNK, seed=8)
    ref = await store.stage_begin("u_digest", chunk_size=UPLOAD_CHUNK)
    receipts = [await stage(store, ref, i, data[i * UPLOAD_CHUNK : (i + 1) * UPLOAD_CHUNK]) for i in range(2)]
    with pytest.raises(DigestMismatch):
        await store.stage_commit(ref, receipts, expected_sha256=sha(b"something else"))
    assert await keys_of(store) == set()
    assert ref in await staging_refs(store)
    blob = await store.stage_commit(ref, receipts, expected_sha256=sha(data))
    assert await read_all(store, blob) == data


async def test_commit_with_a_wrong_size_publishes_nothing(store: BlobStore) -> None:
    ref = await store.stage_begin("u_size", chunk_size=UPLOAD_CHUNK)
    receipt = await stage(store, ref, 0, payload(100))
    with pytest.raises(SizeMismatch):
        await store.stage_commit(ref, [receipt], expected_size=101)
    assert await keys_of(store) == set()


async def test_commit_with_a_gap_is_incomplete(store: BlobStore) -> None:
    ref = await store.stage_begin("u_gap", chunk_size=UPLOAD_CHUNK)
    first = await stage(store, ref, 0, payload(UPLOAD_CHUNK))
    third = await stage(store, ref, 2, payload(10))
    with pytest.raises(UploadIncomplete):
        await store.stage_commit(ref, [first, third])


async def test_commit_of_a_chunk_never_staged_is_incomplete(store: BlobStore) -> None:
    ref = await store.stage_begin("u_lost", chunk_size=UPLOAD_CHUNK)
    data = payload(10)
    with pytest.raises(UploadIncomplete):
        await store.stage_commit(ref, [ChunkReceipt(0, 10, sha(data), xxh(data))])
    assert await keys_of(store) == set()


async def test_abort_frees_the_staging_area(store: BlobStore) -> None:
    ref = await store.stage_begin("u_abort", chunk_size=UPLOAD_CHUNK)
    kept = await store.stage_begin("u_other", chunk_size=UPLOAD_CHUNK)
    await stage(store, ref, 0, payload(UPLOAD_CHUNK))
    await stage(store, ref, 1, payload(10))
    await stage(store, kept, 0, payload(10))
    assert {ref, kept} <= await staging_refs(store)
    await store.stage_abort(ref)
    await store.stage_abort(ref)
    refs = await staging_refs(store)
    assert ref not in refs
    assert kept in refs


async def test_malformed_staging_refs_are_refused(store: BlobStore) -> None:
    with pytest.raises(InvalidRequest):
        await store.stage_begin("../escape", chunk_size=UPLOAD_CHUNK)
    with pytest.raises(InvalidRequest):
        await store.stage_put("a/b", 0, chunks_of(b"x"))
    with pytest.raises(InvalidRequest):
        await store.stage_abort("")

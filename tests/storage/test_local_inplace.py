"""Local chunked uploads written in place: same-index races across threads and processes, a writer killed
midway, failed checksums, sealed files, abort and the old one-file-per-chunk layout."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest

import blobstore
from blobstore.digests import HashingWriter
from blobstore.errors import ChecksumMismatch, ChunkConflict, Corruption, NotFound, UploadIncomplete
from blobstore.models import ChunkReceipt
from blobstore.storage import LocalBlobStore, local_inplace
from blobstore.storage.join_ahead import JoinAheadTable
from blobstore.storage.local_inplace import DATA, RECEIPTS, SEALED, read_records
from tests.storage.conftest import chunks_of, keys_of, read_all

CHUNK = 64 * 1024


def store_at(root: Path) -> LocalBlobStore:
    return LocalBlobStore(root, block_size=16 * 1024)


def child_env() -> dict[str, str]:
    # The child imports the same blobstore as this process, wherever the tree is checked out.
    source_root = str(Path(blobstore.__file__).resolve().parents[1])
    path = os.pathsep.join(filter(None, [source_root, os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


async def held_open(first: bytes, rest: bytes, started: anyio.Event, go: anyio.Event) -> AsyncIterator[bytes]:
    """A body that stops after ``first`` until ``go`` is set."""
    yield first
    started.set()
    await go.wait()
    yield rest


async def test_concurrent_puts_of_one_index_with_other_bytes_do_not_interleave(tmp_path: Path) -> None:
    store = store_at(tmp_path / "store")
    ref = await store.stage_begin("u_race", chunk_size=CHUNK)
    mine, theirs = b"a" * CHUNK, b"b" * CHUNK
    started, go = anyio.Event(), anyio.Event()
    outcomes: dict[str, ChunkReceipt | Exception] = {}

    async def put(name: str, body: AsyncIterator[bytes]) -> None:
        try:
            outcomes[name] = await store.stage_put(ref, 0, body, expected_length=CHUNK)
        except ChunkConflict as exc:
            outcomes[name] = exc

    async with anyio.create_task_group() as group:
        group.start_soon(put, "first", held_open(mine[: CHUNK // 2], mine[CHUNK // 2 :], started, go))
        await started.wait()
        # The second writer is under way while the first holds its half-written chunk.
        group.start_soon(put, "second", chunks_of(theirs))
        await anyio.sleep(0.05)
        go.set()
    first, second = outcomes["first"], outcomes["second"]
    assert isinstance(first, ChunkReceipt)
    assert isinstance(second, ChunkConflict)
    assert await read_all(store, await store.stage_commit(ref, [first])) == mine


def put_in_own_loop(root: Path, ref: str, data: bytes, result: list[object], ready: threading.Event) -> None:
    """``stage_put`` from another thread with its own store (its own descriptors and so its own locks)."""

    async def body() -> AsyncIterator[bytes]:
        yield data[: len(data) // 2]
        ready.wait()
        yield data[len(data) // 2 :]

    async def main() -> None:
        try:
            result.append(await store_at(root).stage_put(ref, 0, body()))
        except ChunkConflict as exc:
            result.append(exc)

    anyio.run(main)


async def test_threads_with_their_own_descriptors_exclude_each_other(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = store_at(root)
    ref = await store.stage_begin("u_threads", chunk_size=CHUNK)
    payloads = [bytes([n]) * CHUNK for n in range(4)]
    results: list[list[object]] = [[] for _ in payloads]
    ready = threading.Event()
    threads = [
        threading.Thread(target=put_in_own_loop, args=(root, ref, data, result, ready))
        for data, result in zip(payloads, results, strict=True)
    ]
    for thread in threads:
        thread.start()
    ready.set()
    for thread in threads:
        thread.join()
    outcomes = [result[0] for result in results]
    accepted = [o for o in outcomes if isinstance(o, ChunkReceipt)]
    assert len(accepted) == 1
    assert sum(isinstance(o, ChunkConflict) for o in outcomes) == len(payloads) - 1
    winner = payloads[outcomes.index(accepted[0])]
    assert await read_all(store, await store.stage_commit(ref, accepted)) == winner


HOLDER = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from blobstore.storage import LocalBlobStore

    root, ref, go = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])

    async def body():
        yield b"c" * 32768
        print("holding", flush=True)
        while not go.exists():
            await asyncio.sleep(0.01)
        yield b"c" * 32768

    async def main():
        receipt = await LocalBlobStore(root, block_size=16384).stage_put(ref, 0, body())
        print(receipt.xxh3, flush=True)

    asyncio.run(main())
    """
)


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    go = tmp_path / "go"
    command = [sys.executable, "-c", HOLDER, str(tmp_path / "store"), "u_procs", str(go)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=child_env()) as child:
        try:
            yield child, go
        finally:
            child.kill()
            child.wait()


async def test_another_process_writing_the_index_holds_off_this_one(
    tmp_path: Path, holder: tuple[subprocess.Popen[str], Path]
) -> None:
    store = store_at(tmp_path / "store")
    ref = await store.stage_begin("u_procs", chunk_size=CHUNK)
    child, go = holder
    assert child.stdout is not None
    assert await anyio.to_thread.run_sync(child.stdout.readline) == "holding\n"
    pulled = anyio.Event()

    async def body() -> AsyncIterator[bytes]:
        pulled.set()
        yield b"d" * CHUNK

    async with anyio.create_task_group() as group:
        outcome: list[object] = []

        async def put() -> None:
            try:
                outcome.append(await store.stage_put(ref, 0, body()))
            except ChunkConflict as exc:
                outcome.append(exc)

        group.start_soon(put)
        await anyio.sleep(0.2)
        # Its body is read only once it holds the chunk's lock, which the other process has.
        assert not pulled.is_set()
        go.touch()
    child_xxh3 = (await anyio.to_thread.run_sync(child.stdout.readline)).strip()
    assert isinstance(outcome[0], ChunkConflict)
    [accepted] = read_records(tmp_path / "store" / "staging" / ref).values()
    assert accepted.xxh3 == child_xxh3
    assert await read_all(store, await store.stage_commit(ref, [accepted])) == b"c" * CHUNK


KILLED = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from blobstore.storage import LocalBlobStore

    async def main():
        store = LocalBlobStore(Path(sys.argv[1]), block_size=16384)
        await store.stage_begin(sys.argv[2], chunk_size=65536)
        await store.stage_put(sys.argv[2], 0, _once(b"0" * 65536))

        async def body():
            yield b"x" * 40000
            print("midway", flush=True)
            await asyncio.sleep(3600)

        await store.stage_put(sys.argv[2], 1, body())

    async def _once(data):
        yield data

    asyncio.run(main())
    """
)


@pytest.fixture
def killed_midway(tmp_path: Path) -> str:
    """An upload whose writer was killed (``SIGKILL``) with chunk 0 accepted and chunk 1 half written."""
    ref = "u_killed"
    command = [sys.executable, "-c", KILLED, str(tmp_path / "store"), ref]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=child_env()) as child:
        try:
            assert child.stdout is not None
            assert child.stdout.readline() == "midway\n"
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
    assert child.returncode == -signal.SIGKILL
    return ref


async def test_a_writer_killed_midway_leaves_the_upload_resumable(tmp_path: Path, killed_midway: str) -> None:
    root = tmp_path / "store"
    store = store_at(root)
    ref = killed_midway
    assert set(read_records(root / "staging" / ref)) == {0}
    # Resume: the accepted chunk again (same bytes: its receipt), the half-written one with other bytes.
    first = await store.stage_put(ref, 0, chunks_of(b"0" * CHUNK))
    second = await store.stage_put(ref, 1, chunks_of(b"y" * 1000))
    blob = await store.stage_commit(ref, [first, second])
    assert await read_all(store, blob) == b"0" * CHUNK + b"y" * 1000
    assert blob.size == CHUNK + 1000


async def test_a_chunk_failing_its_checksum_is_not_kept_and_its_retry_writes_over_it(tmp_path: Path) -> None:
    store = store_at(tmp_path / "store")
    ref = await store.stage_begin("u_retry", chunk_size=CHUNK)
    good = await store.stage_put(ref, 0, chunks_of(b"g" * CHUNK))
    with pytest.raises(ChecksumMismatch):
        await store.stage_put(ref, 1, chunks_of(b"z" * CHUNK), expected_xxh3=good.xxh3)
    assert set(read_records(tmp_path / "store" / "staging" / ref)) == {0}
    with pytest.raises(UploadIncomplete):
        await store.stage_commit(ref, [good, ChunkReceipt(1, CHUNK, good.sha256, good.xxh3)])
    # The retry is shorter (the last chunk): the commit does not keep the failed attempt's bytes past it.
    retry = await store.stage_put(ref, 1, chunks_of(b"r" * 10))
    blob = await store.stage_commit(ref, [good, retry])
    assert await read_all(store, blob) == b"g" * CHUNK + b"r" * 10
    assert (store.root / blob.key).stat().st_size == CHUNK + 10


async def test_the_same_bytes_again_give_the_receipt_and_other_bytes_conflict(tmp_path: Path) -> None:
    store = store_at(tmp_path / "store")
    ref = await store.stage_begin("u_again", chunk_size=CHUNK)
    receipt = await store.stage_put(ref, 0, chunks_of(b"s" * 100))
    assert await store.stage_put(ref, 0, chunks_of(b"s" * 100)) == receipt
    with pytest.raises(ChunkConflict):
        await store.stage_put(ref, 0, chunks_of(b"t" * 100))
    assert await read_all(store, await store.stage_commit(ref, [receipt])) == b"s" * 100


async def test_a_published_blob_is_never_written_by_a_later_chunk(tmp_path: Path) -> None:
    store = store_at(tmp_path / "store")
    ref = await store.stage_begin("u_sealed", chunk_size=CHUNK)
    area = store.root / "staging" / ref
    first = await store.stage_put(ref, 0, chunks_of(b"p" * CHUNK))
    blob = await store.stage_commit(ref, [first])
    assert sorted(p.name for p in area.iterdir()) == [RECEIPTS, SEALED]
    # The upload is open again (say its artifact's commit failed) and, of unknown size, grows by a chunk.
    second = await store.stage_put(ref, 1, chunks_of(b"q" * 5))
    assert await read_all(store, blob) == b"p" * CHUNK
    assert (store.root / blob.key).stat().st_size == CHUNK
    grown = await store.stage_commit(ref, [first, second])
    assert await read_all(store, grown) == b"p" * CHUNK + b"q" * 5
    assert await read_all(store, blob) == b"p" * CHUNK


async def test_a_completion_that_died_after_sealing_is_taken_up_again(tmp_path: Path) -> None:
    store = store_at(tmp_path / "store")
    ref = await store.stage_begin("u_died", chunk_size=CHUNK)
    area = store.root / "staging" / ref
    first = await store.stage_put(ref, 0, chunks_of(b"1" * CHUNK))
    os.rename(area / DATA, area / SEALED)  # what a completion killed before its link leaves
    second = await store.stage_put(ref, 1, chunks_of(b"2" * 7))
    assert sorted(p.name for p in area.iterdir()) == [DATA, RECEIPTS]
    assert await read_all(store, await store.stage_commit(ref, [first, second])) == b"1" * CHUNK + b"2" * 7


async def test_a_duplicate_completion_links_the_same_bytes_and_dedup_drops_one(tmp_path: Path) -> None:
    store = store_at(tmp_path / "store")
    ref = await store.stage_begin("u_dedup", chunk_size=CHUNK)
    receipt = await store.stage_put(ref, 0, chunks_of(b"d" * 3000))
    blob = await store.stage_commit(ref, [receipt])
    again = await store.stage_commit(ref, [receipt])
    assert again.key != blob.key
    assert again.sha256 == blob.sha256
    await store.delete(again.key)  # what the service does when the artifact dedups onto a live blob
    await store.stage_abort(ref)
    assert await keys_of(store) == {blob.key}
    assert await read_all(store, blob) == b"d" * 3000


async def test_abort_while_a_chunk_streams_in_keeps_nothing(tmp_path: Path) -> None:
    store = store_at(tmp_path / "store")
    ref = await store.stage_begin("u_abort", chunk_size=CHUNK)
    started, go = anyio.Event(), anyio.Event()
    failures: list[Exception] = []

    async def put() -> None:
        try:
            await store.stage_put(ref, 0, held_open(b"x" * 10, b"y" * 10, started, go))
        except NotFound as exc:
            failures.append(exc)

    async with anyio.create_task_group() as group:
        group.start_soon(put)
        await started.wait()
        await store.stage_abort(ref)
        go.set()
    assert len(failures) == 1
    assert not (store.root / "staging" / ref).exists()
    assert [entry async for entry in store.iter_staging()] == []
    with pytest.raises(NotFound):
        await store.stage_put(ref, 0, chunks_of(b"late"))


async def test_abort_and_sweeps_leave_nothing_of_a_sealed_area(tmp_path: Path) -> None:
    store = store_at(tmp_path / "store")
    ref = await store.stage_begin("u_swept", chunk_size=CHUNK)
    receipt = await store.stage_put(ref, 0, chunks_of(b"w" * 10))
    blob = await store.stage_commit(ref, [receipt])
    # No temp file is involved: the temp sweep has nothing of the upload to take, even long after.
    assert await store.sweep_temp(datetime.now(UTC) + timedelta(days=1)) == 0
    assert [entry.staging_ref async for entry in store.iter_staging()] == [ref]
    await store.stage_abort(ref)
    assert list((store.root / "staging").iterdir()) == []
    assert await read_all(store, blob) == b"w" * 10


async def test_an_area_of_the_old_layout_is_still_completed(tmp_path: Path) -> None:
    store = store_at(tmp_path / "store")
    area = store.root / "staging" / "u_old"
    area.mkdir(mode=0o700)
    first = await store.stage_put("u_old", 0, chunks_of(b"o" * 100))
    second = await store.stage_put("u_old", 1, chunks_of(b"l" * 50))
    assert sorted(p.name for p in area.iterdir()) == ["0", "1"]
    assert await read_all(store, await store.stage_commit("u_old", [first, second])) == b"o" * 100 + b"l" * 50


# -- joining ahead: the completion continues the pass the chunk writers ran over the leading chunks ----------


def expected_blob(data: bytes, block_size: int) -> tuple[str, tuple[str, ...]]:
    writer = HashingWriter(block_size=block_size)
    writer.update(data)
    digest = writer.finish()
    return digest.sha256, digest.block_xxh3


async def put_all(store: LocalBlobStore, ref: str, data: bytes, order: list[int]) -> list[ChunkReceipt]:
    receipts = {}
    for index in order:
        piece = data[index * CHUNK : (index + 1) * CHUNK]
        receipts[index] = await store.stage_put(ref, index, chunks_of(piece), expected_length=len(piece))
    return [receipts[index] for index in sorted(receipts)]


@pytest.mark.parametrize(
    "order", [[0, 1, 2, 3], [2, 3, 1, 0], [3, 0, 2, 1]], ids=["in order", "first last", "mixed"]
)
async def test_chunks_accepted_in_any_order_are_joined_ahead_of_the_completion(
    tmp_path: Path, order: list[int]
) -> None:
    store = store_at(tmp_path / "store")
    ref = await store.stage_begin("u_join", chunk_size=CHUNK)
    data = os.urandom(3 * CHUNK + 1000)
    receipts = await put_all(store, ref, data, order)
    (join,) = store.joins_ahead._joins.values()
    assert join.receipts == receipts  # every chunk joined, whichever arrived last
    blob = await store.stage_commit(ref, receipts, expected_size=len(data))
    assert (blob.sha256, blob.block_xxh3) == expected_blob(data, store.block_size)
    assert len(store.joins_ahead) == 0  # the completion took it
    assert await read_all(store, blob) == data


async def test_a_join_stops_at_the_first_missing_chunk_and_the_completion_goes_on_from_there(
    tmp_path: Path,
) -> None:
    store = store_at(tmp_path / "store")
    ref = await store.stage_begin("u_gap", chunk_size=CHUNK)
    data = os.urandom(4 * CHUNK)
    receipts = await put_all(store, ref, data, [0, 1, 3])
    (join,) = store.joins_ahead._joins.values()
    assert [r.index for r in join.receipts] == [0, 1]
    receipts += await put_all(store, ref, data, [2])
    assert [r.index for r in join.receipts] == [0, 1, 2, 3]
    blob = await store.stage_commit(ref, sorted(receipts, key=lambda r: r.index), expected_size=len(data))
    assert await read_all(store, blob) == data


async def test_a_chunk_changed_at_rest_before_the_join_reached_it_fails_the_completion(
    tmp_path: Path,
) -> None:
    store = store_at(tmp_path / "store")
    ref = await store.stage_begin("u_rot", chunk_size=CHUNK)
    data = os.urandom(2 * CHUNK)
    receipts = await put_all(store, ref, data, [1])
    area = tmp_path / "store" / "staging" / ref
    with (area / DATA).open("r+b") as handle:  # chunk 1 rots on disk after it was accepted
        handle.seek(CHUNK + 5)
        handle.write(bytes([data[CHUNK + 5] ^ 0xFF]))
    receipts = await put_all(store, ref, data, [0, 1])  # 1 again: only compared; 0 starts the join
    (join,) = store.joins_ahead._joins.values()
    assert join.broken
    with pytest.raises(Corruption):
        await store.stage_commit(ref, receipts, expected_size=len(data))


async def test_a_join_that_cannot_read_the_receipts_leaves_the_accepted_chunk_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = store_at(tmp_path / "store")
    ref = await store.stage_begin("u_eio", chunk_size=CHUNK)
    data = os.urandom(2 * CHUNK)
    read_record = local_inplace._read_record

    def failing(fd: int, index: int) -> ChunkReceipt | None:
        if threading.current_thread() is not threading.main_thread() and index == 1:
            raise OSError(5, "Input/output error")
        return read_record(fd, index)

    monkeypatch.setattr(local_inplace, "_read_record", failing)
    first = await put_all(store, ref, data, [0])  # the join reaches chunk 0, then fails to read record 1
    (join,) = store.joins_ahead._joins.values()
    assert join.broken
    monkeypatch.setattr(local_inplace, "_read_record", read_record)
    receipts = first + await put_all(store, ref, data, [1])
    assert sorted(read_records(tmp_path / "store" / "staging" / ref)) == [0, 1]
    blob = await store.stage_commit(ref, receipts, expected_size=len(data))  # hashed from the start
    assert (blob.sha256, blob.block_xxh3) == expected_blob(data, store.block_size)


async def test_a_join_that_saw_other_receipts_is_not_used(tmp_path: Path) -> None:
    store = store_at(tmp_path / "store")
    ref = await store.stage_begin("u_other", chunk_size=CHUNK)
    data = os.urandom(2 * CHUNK)
    receipts = await put_all(store, ref, data, [0, 1])
    (join,) = store.joins_ahead._joins.values()
    # As if this process had joined bytes the metadata does not name (a stale state): hashing them would
    # publish the wrong digest, so the completion starts from the first byte.
    join.writer.update(b"not the upload's bytes")
    join.receipts[0] = ChunkReceipt(0, CHUNK, "0" * 64, receipts[0].xxh3)
    blob = await store.stage_commit(ref, receipts, expected_size=len(data))
    assert (blob.sha256, blob.block_xxh3) == expected_blob(data, store.block_size)


async def test_parallel_writers_leave_no_accepted_chunk_out_of_the_join(tmp_path: Path) -> None:
    store = store_at(tmp_path / "store")
    ref = await store.stage_begin("u_many", chunk_size=CHUNK)
    count = 24
    data = os.urandom(count * CHUNK)
    order = list(range(count))
    random.Random(7).shuffle(order)
    receipts: dict[int, ChunkReceipt] = {}

    async def put(index: int) -> None:
        piece = data[index * CHUNK : (index + 1) * CHUNK]
        receipts[index] = await store.stage_put(ref, index, chunks_of(piece), expected_length=CHUNK)

    async with anyio.create_task_group() as group:
        for index in order:
            group.start_soon(put, index)
    (join,) = store.joins_ahead._joins.values()
    assert [r.index for r in join.receipts] == list(range(count))
    blob = await store.stage_commit(ref, [receipts[i] for i in range(count)], expected_size=len(data))
    assert (blob.sha256, blob.block_xxh3) == expected_blob(data, store.block_size)


def test_the_join_table_forgets_the_least_recently_advanced_upload() -> None:
    table = JoinAheadTable(limit=2)
    first = table.get(("a", 1), 1024)
    table.get(("b", 2), 1024)
    assert table.get(("a", 1), 1024) is first  # used again: now the most recent
    table.get(("c", 3), 1024)
    assert table.take(("b", 2)) is None
    assert table.take(("a", 1)) is first
    assert len(table) == 1


async def test_a_chunk_that_completes_a_long_run_joins_a_bounded_part_and_the_completion_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_inplace, "_JOIN_BUDGET", 2 * CHUNK)
    store = store_at(tmp_path / "store")
    ref = await store.stage_begin("u_long", chunk_size=CHUNK)
    data = os.urandom(6 * CHUNK)
    receipts = await put_all(store, ref, data, [1, 2, 3, 4, 5, 0])
    (join,) = store.joins_ahead._joins.values()
    assert [r.index for r in join.receipts] == [0, 1]
    blob = await store.stage_commit(ref, receipts, expected_size=len(data))
    assert (blob.sha256, blob.block_xxh3) == expected_blob(data, store.block_size)

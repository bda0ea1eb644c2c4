"""Writing incoming batches while the next ones are received: order, overlap, and errors as themselves."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import anyio.lowlevel
import pytest

from blobstore.errors import StorageFull, TooLarge
from blobstore.storage.streams import write_overlapped


async def source(events: list[str], count: int, *, fail_after: int | None = None) -> AsyncIterator[bytearray]:
    for index in range(count):
        if fail_after is not None and index == fail_after:
            raise TooLarge(max_size=1)
        events.append(f"received {index}")
        yield bytearray([index])


async def test_every_batch_is_written_once_and_in_order() -> None:
    events: list[str] = []
    written: list[int] = []

    async def write(batch: bytearray) -> None:
        await anyio.lowlevel.checkpoint()
        written.append(batch[0])

    await write_overlapped(source(events, 50), write)
    assert written == list(range(50))


async def test_the_next_batch_is_received_while_one_is_written_and_no_further() -> None:
    events: list[str] = []
    release = anyio.Event()

    async def write(batch: bytearray) -> None:
        events.append(f"writing {batch[0]}")
        if batch[0] == 0:
            await release.wait()
        events.append(f"wrote {batch[0]}")

    async with anyio.create_task_group() as group:
        group.start_soon(write_overlapped, source(events, 4), write)
        await anyio.wait_all_tasks_blocked()
        # Batch 0 is being written; batch 1 was received meanwhile and waits; batch 2 was not asked for.
        assert sorted(events) == ["received 0", "received 1", "writing 0"]
        release.set()
    assert events[-1] == "wrote 3"


async def test_a_failed_write_is_raised_as_itself_and_stops_the_receiving() -> None:
    events: list[str] = []

    async def write(batch: bytearray) -> None:
        if batch[0] == 2:
            raise StorageFull()

    with pytest.raises(StorageFull):
        await write_overlapped(source(events, 100), write)
    assert len(events) <= 4  # batches 0-2, and one received ahead at most


async def test_a_failed_source_is_raised_as_itself_after_the_write_in_hand_finished() -> None:
    events: list[str] = []

    async def write(batch: bytearray) -> None:
        await anyio.to_thread.run_sync(lambda: None)
        events.append(f"wrote {batch[0]}")

    with pytest.raises(TooLarge):
        await write_overlapped(source(events, 10, fail_after=3), write)
    assert "wrote 0" in events
    assert events.count("received 0") == 1


async def test_a_write_failing_in_a_worker_thread_while_the_next_batch_waits_is_raised_as_itself() -> None:
    events: list[str] = []

    def fail() -> None:
        raise StorageFull()

    async def write(batch: bytearray) -> None:
        # The receiving side is parked handing over the next batch when this fails: its broken hand-over
        # must not be what the caller sees.
        await anyio.wait_all_tasks_blocked()
        await anyio.to_thread.run_sync(fail)

    with pytest.raises(StorageFull):
        await write_overlapped(source(events, 100), write)
    assert len(events) <= 3

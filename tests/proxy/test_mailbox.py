"""The bounded box the streamable-HTTP upstream's answers meet in."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, cast

from mcp_resources.proxy.mailbox import Mailbox
from mcp_resources.proxy.message_reader import Streamed, Whole


class Held:
    """What a streamed message holds in the store's staging: here, only whether it was freed."""

    def __init__(self) -> None:
        self.released = False

    async def release(self) -> None:
        self.released = True


async def test_a_full_box_makes_the_reader_wait_until_a_message_is_taken() -> None:
    box = Mailbox(2)
    await box.put(Whole(b"1"))
    await box.put(Whole(b"2"))
    third = asyncio.create_task(box.put(Whole(b"3")))
    await asyncio.sleep(0.05)
    assert not third.done()
    assert await box.get() == Whole(b"1")
    await asyncio.wait_for(third, 5)
    assert [await box.get(), await box.get()] == [Whole(b"2"), Whole(b"3")]


async def test_after_the_end_the_held_messages_come_then_none_and_later_ones_are_freed() -> None:
    box = Mailbox(4)
    await box.put(Whole(b"kept"))
    await box.end()
    held = Held()
    await box.put(Streamed(message={}, size=10, sinks=cast(Any, held)))
    assert held.released
    assert await box.get() == Whole(b"kept")
    assert await box.get() is None


async def test_the_end_wakes_a_reader_waiting_for_room() -> None:
    box = Mailbox(1)
    await box.put(Whole(b"1"))
    held = Held()
    waiting = asyncio.create_task(box.put(Streamed(message={}, size=1, sinks=cast(Any, held))))
    await asyncio.sleep(0.05)
    await box.end()
    await asyncio.wait_for(waiting, 5)
    assert held.released


async def test_a_reader_cancelled_while_waiting_for_room_frees_what_its_message_holds() -> None:
    box = Mailbox(1)
    await box.put(Whole(b"1"))
    held = Held()
    waiting = asyncio.create_task(box.put(Streamed(message={}, size=1, sinks=cast(Any, held))))
    await asyncio.sleep(0.05)
    waiting.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await waiting
    assert held.released
    assert await box.get() == Whole(b"1")

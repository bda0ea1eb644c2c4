"""Batching of incoming byte streams before they are hashed and written in a worker thread."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable

import anyio

WRITE_BATCH = 1024 * 1024


async def batched(
    data: AsyncIterable[bytes], check_size: Callable[[int], None], batch_size: int = WRITE_BATCH
) -> AsyncIterator[bytearray]:
    """Regroup ``data`` into pieces of about ``batch_size`` bytes.

    Small network reads would otherwise each cost a thread hop. ``check_size`` sees the running total after
    every piece, so an oversized stream is refused before its batch is hashed or stored.

    Every batch but the last holds at least ``batch_size`` bytes, and the last is yielded once ``data`` has
    ended: a shorter batch is always the end of the stream (``put`` publishes a small body in the same step).
    """
    batch = bytearray()
    received = 0
    async for piece in data:
        received += len(piece)
        check_size(received)
        batch += piece
        if len(batch) >= batch_size:
            yield batch
            batch = bytearray()
    if batch:
        yield batch


async def write_overlapped(
    batches: AsyncIterable[bytearray], write: Callable[[bytearray], Awaitable[None]]
) -> None:
    """``write`` every batch in order while the next one is received.

    For a large body, writing a batch (hashing and storing it, in a worker thread) and receiving the next (on
    the event loop) take about as long as each other; one after the other, each waited for the other. At most
    one batch is received ahead, so a request holds two batches at most.
    """
    send, receive = anyio.create_memory_object_stream[bytearray](0)

    async def drain() -> None:
        async with receive:
            async for batch in receive:
                await write(batch)

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(drain)
            async with send:
                async for batch in batches:
                    try:
                        await send.send(batch)
                    except anyio.BrokenResourceError:
                        # The writer failed and closed its end: its error, not this one, is the answer.
                        break
    except BaseExceptionGroup as failed:
        # The caller expects the catalogue error itself, as from a plain loop; a failure of one side cancels
        # the other, so there is one error (a second one at the same moment is kept as the first's cause).
        errors = [e for e in failed.exceptions if not isinstance(e, anyio.get_cancelled_exc_class())]
        if not errors:
            raise
        if len(errors) > 1:
            raise errors[0] from errors[1]
        raise errors[0] from None

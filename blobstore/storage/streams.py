"""Batching of incoming byte streams before they are hashed and written in a worker thread."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Callable

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

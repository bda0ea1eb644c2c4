"""One writing request per upload at a time in this process, the newest preempting the holder (as tusd)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import anyio

from blobstore.errors import Conflict


@dataclass(slots=True)
class _Holder:
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    released: anyio.Event = field(default_factory=anyio.Event)


class UploadLocks:
    """One writing request per upload at a time in this process; a newer one preempts the holder.

    A client that lost its connection reconnects and PATCHes again while the server may still be waiting on
    the old body: preempting (as tusd does) lets the new request in at once instead of after a body timeout.
    The holder is only ever cancelled while it waits for body bytes (its storage and metadata work is
    shielded), and ends with ``conflict`` after keeping what it received.
    """

    def __init__(self) -> None:
        self._holders: dict[str, _Holder] = {}

    @contextlib.asynccontextmanager
    async def hold(self, upload_id: str) -> AsyncIterator[None]:
        while (current := self._holders.get(upload_id)) is not None:
            current.scope.cancel()
            await current.released.wait()
        holder = _Holder()
        self._holders[upload_id] = holder
        try:
            with holder.scope:
                yield
        finally:
            del self._holders[upload_id]
            holder.released.set()
        if holder.scope.cancelled_caught:
            raise Conflict("a newer request for this upload took over")

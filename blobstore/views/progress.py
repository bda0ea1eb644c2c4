"""How far a long view has come, told to whoever asked for it.

A view kind calls :func:`report` as its work advances (pages rendered, seconds transcribed); the edge that
runs the call sets a reporter for it with :func:`reporting` (the MCP edge turns it into
``notifications/progress`` when the request carries a progress token). Without a reporter, :func:`report`
does nothing, so a kind never needs to know which protocol, if any, is listening.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar

Reporter = Callable[[float, float | None, str | None], Awaitable[None]]
"""``(done, total, message)``: ``total`` is None where it is not known."""

_reporter: ContextVar[Reporter | None] = ContextVar("blobstore_view_progress", default=None)


@contextlib.contextmanager
def reporting(reporter: Reporter | None) -> Iterator[None]:
    """Send the progress of the views computed inside this block to ``reporter``."""
    token = _reporter.set(reporter)
    try:
        yield
    finally:
        _reporter.reset(token)


async def report(done: float, total: float | None = None, message: str | None = None) -> None:
    """Tell the current call's reporter, if it has one, that ``done`` of ``total`` is done."""
    reporter = _reporter.get()
    if reporter is not None:
        await reporter(done, total, message)

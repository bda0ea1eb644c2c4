"""How far a long view has come, told to whoever asked for it.

A view kind calls :func:`report` as its work advances (pages rendered, seconds transcribed); the edge that
runs the call sets a reporter for it with :func:`reporting` (the MCP edge turns it into
``notifications/progress`` when the request carries a progress token). Without a reporter, :func:`report`
does nothing, so a kind never needs to know which protocol, if any, is listening.

A job that is one long decoder run (frames extracted, scenes searched, seconds of audio decoded) tells its
progress from inside the worker process with :func:`step`: the worker writes it as a line before its
answer (:func:`progress_line`), and the runner hands each such line to :func:`report` in the process that
waits for the answer. This module is imported by the worker, so it loads nothing beyond the standard
library's lightest modules.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from typing import Any, Final

Reporter = Callable[[float, float | None, str | None], Awaitable[None]]
"""``(done, total, message)``: ``total`` is None where it is not known."""
Step = Callable[[float, float | None, str | None], None]
"""A worker's synchronous counterpart of :data:`Reporter`."""

FIRST_AFTER_SECONDS: Final = 1.0
"""A call tells nothing before it has run this long: a fast view sends no notification at all."""
EVERY_SECONDS: Final = 0.25
"""At most four notifications a second (and as many progress lines from a worker), however fine the steps."""
PROGRESS_KEY: Final = "progress"
"""The key that makes a worker's line a progress line rather than its answer's header (which has ``ok``)."""

_reporter: ContextVar[Reporter | None] = ContextVar("blobstore_view_progress", default=None)
_step: ContextVar[Step | None] = ContextVar("blobstore_view_step", default=None)


@contextlib.contextmanager
def reporting(reporter: Reporter | None) -> Iterator[None]:
    """Send the progress of the views computed inside this block to ``reporter``."""
    token = _reporter.set(reporter)
    try:
        yield
    finally:
        _reporter.reset(token)


def is_reporting() -> bool:
    """Whether anyone listens to the current call's progress (a worker needs to tell it only then)."""
    return _reporter.get() is not None


async def report(done: float, total: float | None = None, message: str | None = None) -> None:
    """Tell the current call's reporter, if it has one, that ``done`` of ``total`` is done."""
    reporter = _reporter.get()
    if reporter is not None:
        await reporter(done, total, message)


class Throttle:
    """Which of a call's progress values to pass on: none in its first ``after`` seconds, then at most one
    every ``every`` seconds, each larger than the last (a value equal to ``total`` whenever it comes, so
    that the last one says the work is done)."""

    def __init__(
        self,
        *,
        after: float = FIRST_AFTER_SECONDS,
        every: float = EVERY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.clock = clock
        self.after = after
        self.every = every
        self.started = clock()
        self._sent_at: float | None = None
        self._sent = float("-inf")

    def passes(self, done: float, total: float | None) -> bool:
        now = self.clock()
        if done <= self._sent or now - self.started < self.after:
            return False
        finished = total is not None and done >= total
        if not finished and self._sent_at is not None and now - self._sent_at < self.every:
            return False
        self._sent, self._sent_at = done, now
        return True


def throttled(send: Reporter, throttle: Throttle | None = None) -> Reporter:
    """``send`` behind a :class:`Throttle` (a fresh one, started now, by default)."""
    gate = throttle if throttle is not None else Throttle()

    async def reporter(done: float, total: float | None, message: str | None) -> None:
        if gate.passes(done, total):
            await send(done, total, message)

    return reporter


# -- inside a decoder worker ------------------------------------------------------------------------------


@contextlib.contextmanager
def stepping(step: Step | None) -> Iterator[None]:
    """Send the :func:`step` calls of the job run inside this block to ``step`` (the worker's output)."""
    token = _step.set(step)
    try:
        yield
    finally:
        _step.reset(token)


def step(done: float, total: float | None = None, message: str | None = None) -> None:
    """Tell, from inside a job, that ``done`` of ``total`` is done (frames extracted, seconds decoded);
    nothing when the job's caller does not listen."""
    sink = _step.get()
    if sink is not None:
        sink(done, total, message)


def progress_line(done: float, total: float | None, message: str | None) -> bytes:
    """A worker's progress line: JSON, before its answer's header line."""
    fields: dict[str, Any] = {PROGRESS_KEY: done, "total": total, "message": message}
    return json.dumps(fields, separators=(",", ":")).encode() + b"\n"


def read_progress_line(fields: dict[str, Any]) -> tuple[float, float | None, str | None] | None:
    """The ``(done, total, message)`` of a worker's line, or None when it is its answer's header."""
    if PROGRESS_KEY not in fields:
        return None
    total = fields.get("total")
    message = fields.get("message")
    return (
        float(fields[PROGRESS_KEY]),
        float(total) if isinstance(total, int | float) else None,
        str(message) if message is not None else None,
    )

"""The HTTP requests the app is serving, so that its lifespan lets them end before it closes the store.

On a stop, granian lets each open connection finish its request, then runs the app's lifespan shutdown
and never runs the event loop again. A request whose client had already gone (a load generator that hung
up leaves a queue of them) can still be running in the app then. Without a wait, such requests met a closed
store, and one that had just handed work to an AnyIO worker thread left that thread waiting for a task that
would never finish: the process hung at exit, holding its port.

So the lifespan's shutdown first lets the requests in flight end, for up to
``BLOBSTORE_SHUTDOWN_GRACE_SECONDS``; then it cancels those still running: a request inside one of AnyIO's
shielded sections (a commit whose outcome it must learn) is cancelled once it has left it, and the drain
waits for every cancelled request to end. From then on the app answers every new request ``503`` without
touching the store, which is about to close. Under uvicorn and hypercorn, which wait for their requests
before the lifespan shutdown, nothing is left to wait for."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Final

logger = logging.getLogger("blobstore.api")

CANCELLED_WAIT_SECONDS: Final = 10.0
"""How long the cancelled requests get to end (their shielded commits, their threads' calls)."""
SHIELD_POLL_SECONDS: Final = 0.05
"""How often a request inside a shielded section is looked at again, to be cancelled once it left it."""


class InFlight:
    """The tasks serving HTTP requests now; :meth:`drain` lets them end, then closes the app to new ones."""

    __slots__ = ("_cancelled", "_tasks", "closed")

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[object]] = set()
        self._cancelled: set[asyncio.Task[object]] = set()
        self.closed = False

    def enter(self) -> asyncio.Task[object] | None:
        """The current request's task, now counted; None outside asyncio (nothing to wait for then)."""
        try:
            task = asyncio.current_task()
        except RuntimeError:
            return None
        if task is not None:
            self._tasks.add(task)
        return task

    def leave(self, task: asyncio.Task[object] | None) -> None:
        if task is not None:
            self._tasks.discard(task)
            self._cancelled.discard(task)

    def cancelled_by_drain(self, task: asyncio.Task[object] | None) -> bool:
        """Whether :meth:`drain` cancelled ``task``: the request then ends quietly (see ``BlobstoreAPI``)."""
        return task in self._cancelled

    def __len__(self) -> int:
        return len(self._tasks)

    async def drain(self, grace: float) -> None:
        """Wait up to ``grace`` seconds for every request in flight (and any that arrives meanwhile) to end,
        cancel the rest and wait for them; then :attr:`closed`."""
        deadline = time.monotonic() + grace
        while self._tasks and (left := deadline - time.monotonic()) > 0:
            await asyncio.wait(set(self._tasks), timeout=left)
        self.closed = True
        late = set(self._tasks)
        if not late:
            return
        logger.warning(
            "stopping: %d request(s) still running after the %g s grace are cancelled", len(late), grace
        )
        cancelled = self._cancelled
        deadline = time.monotonic() + CANCELLED_WAIT_SECONDS
        while late and (left := deadline - time.monotonic()) > 0:
            for task in late - cancelled:
                # A task's own cancel() goes through AnyIO's shields, which keep a commit and its outcome
                # together: a task inside one is cancelled once it has left it.
                if not _shielded(task):
                    task.cancel()
                    cancelled.add(task)
            _, late = await asyncio.wait(late, timeout=min(left, SHIELD_POLL_SECONDS))
        if late:
            logger.warning("stopping: %d cancelled request(s) did not end; closing anyway", len(late))


def _shielded(task: asyncio.Task[object]) -> bool:
    """Whether ``task`` is inside a shielded AnyIO cancel scope now (True when that cannot be told).

    AnyIO keeps a task's innermost scope in ``_task_states`` and each scope's enclosing one in
    ``_parent_scope``: private names, so an AnyIO without them makes every task count as shielded (the
    drain then only waits) rather than cancel through a shield. ``tests/api/test_in_flight.py`` runs this
    against the installed AnyIO.
    """
    try:
        from anyio._backends._asyncio import _task_states

        state = _task_states.get(task)
        scope = state.cancel_scope if state is not None else None
        while scope is not None:
            if scope.shield:
                return True
            scope = scope._parent_scope
    except (ImportError, AttributeError):
        return True
    return False

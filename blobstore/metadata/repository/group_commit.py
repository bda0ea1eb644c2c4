"""Group commit: concurrent SQLite write transactions of one kind share one ``BEGIN IMMEDIATE … COMMIT``.

SQLite has one writer at a time, and with ``synchronous=FULL`` every commit syncs the WAL. Sixteen uploads
committing at once would otherwise take the write lock in turn, each waiting in SQLite's busy handler (which
sleeps in steps of up to 100 ms) and each paying its own WAL sync. Here the requests queue in the process
instead: whoever holds the lock runs every request queued so far in one transaction and commits once. A
group whose requests all succeed runs without savepoints; when one fails, the transaction is rolled back and
the group runs again with each request inside its own ``SAVEPOINT``, where the failing one rolls back to its
savepoint and gets its error while the others go on. Nobody learns an outcome before the shared ``COMMIT``
has returned, so an acknowledged write is as durable as one committed alone, and when the ``COMMIT`` fails
(or the process dies first) no request of the group is acknowledged.

The group's transaction runs in one worker-thread call on a synchronous ``sqlite3`` connection (one thread
hop per group rather than several per statement). Other writers (the rest of the repository's async engine,
the CLI) still meet it at SQLite's own write lock, as before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import anyio
import anyio.to_thread
import sqlalchemy as sa

T = TypeVar("T")

Work = Callable[[sa.Connection], T]
"""The statements of one request, run on the group's connection inside the request's savepoint."""


@dataclass(eq=False, slots=True)
class _Request(Generic[T]):
    work: Work[T]
    done: bool = False
    value: T | None = None
    error: BaseException | None = field(default=None)

    def outcome(self) -> T:
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]


class GroupCommit(Generic[T]):
    """Runs requests of one kind on ``engine`` in shared transactions, one group at a time."""

    def __init__(self, engine: sa.Engine) -> None:
        self._engine = engine
        self._queue: list[_Request[T]] = []
        self._lock = anyio.Lock()

    async def run(self, work: Work[T]) -> T:
        """Run ``work`` in the next group's transaction; its result once that transaction has committed."""
        request = _Request(work)
        self._queue.append(request)
        # Shielded: a request in a group must learn whether it was committed, so its caller never cleans up
        # after a write that in fact became visible. A cancellation takes effect once the outcome is known.
        with anyio.CancelScope(shield=True):
            async with self._lock:
                if not request.done:
                    group, self._queue = self._queue, []
                    await anyio.to_thread.run_sync(self._commit, group)
        return request.outcome()

    def _commit(self, group: list[_Request[T]]) -> None:
        try:
            if not self._commit_plainly(group):
                self._commit_apart(group)
        except BaseException as exc:
            # Nothing of the group was committed: every request that had succeeded fails with the commit.
            for request in group:
                if request.error is None:
                    request.error = exc
                    request.value = None
            if not isinstance(exc, Exception):
                raise
        finally:
            for request in group:
                request.done = True

    def _commit_plainly(self, group: list[_Request[T]]) -> bool:
        """The group in one transaction without savepoints (two statements fewer per request); False, with
        nothing committed, when a request of a larger group failed: the group then runs again with one
        savepoint each (a group of one just fails).

        A request's work is its statements only, so running it again after the rollback is safe; failures
        (a quota refusal, a lost completion) are rare.
        """
        values: list[T] = []
        with self._engine.connect() as conn, conn.begin() as transaction:
            for request in group:
                try:
                    values.append(request.work(conn))
                except Exception as exc:
                    transaction.rollback()
                    if len(group) == 1:
                        request.error = exc
                        return True
                    return False
        for done, value in zip(group, values, strict=True):
            done.value = value
        return True

    def _commit_apart(self, group: list[_Request[T]]) -> None:
        with self._engine.begin() as conn:
            for request in group:
                try:
                    with conn.begin_nested():
                        request.value = request.work(conn)
                except Exception as exc:
                    request.error = exc

"""Directory fsyncs shared by concurrent writers, as a group commit shares one ``COMMIT``.

A new name in a directory is durable once the directory has been fsynced *after* the name was linked. When
sixteen uploads link into one directory at once, one fsync that starts after all sixteen links covers them
all: each caller joins the next round that has not started yet, and is answered only when that round's fsync
has returned. A caller never joins a round already running, since that fsync may have started before its link.

Rounds of one directory run one at a time; while one runs, the callers that arrive gather in the next, which
starts as soon as the running one ends. A failed fsync fails every caller of its round (each gets its own
``OSError``) and is never retried for them; later rounds start with a new fsync of their own, as separate
callers did before.

Callers are worker threads (a publish runs in one worker-thread call), so a caller waits on a condition
variable rather than on the event loop: no extra thread hop per publish.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

DirectoryFsync = Callable[[Path], None]


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(eq=False, slots=True)
class _Round:
    members: int = 1
    done: bool = False
    error: OSError | None = None
    interrupted: bool = False


class DirectorySync:
    """Grouped ``fsync`` of directories; ``fsync`` is the primitive (tests pass one that records calls)."""

    def __init__(self, fsync: DirectoryFsync = fsync_dir) -> None:
        self._fsync = fsync
        self._changed = threading.Condition()
        self._running: dict[Path, _Round] = {}
        self._waiting: dict[Path, _Round] = {}

    def sync(self, path: Path) -> None:
        """Return once an fsync of ``path`` that started after this call succeeded; else raise its error."""
        with self._changed:
            running = self._running.get(path)
            if running is None:
                mine = self._running[path] = _Round()
            else:
                mine = self._waiting.setdefault(path, _Round(members=0))
                mine.members += 1
                while not mine.done and self._running.get(path) is not None:
                    self._changed.wait()
                if mine.done:
                    return _outcome(mine)
                # The round before ours ended and nobody has started ours yet: this caller runs it.
                del self._waiting[path]
                self._running[path] = mine
        self._run(path, mine)
        return _outcome(mine)

    def waiting(self, path: Path) -> int:
        """How many callers are gathered for the next fsync of ``path`` (not yet started)."""
        with self._changed:
            found = self._waiting.get(path)
            return 0 if found is None else found.members

    def _run(self, path: Path, round_: _Round) -> None:
        try:
            self._fsync(path)
        except OSError as exc:
            round_.error = exc
        except BaseException:
            round_.interrupted = True
            raise
        finally:
            with self._changed:
                round_.done = True
                del self._running[path]
                self._changed.notify_all()


def _outcome(round_: _Round) -> None:
    if round_.interrupted:
        # The fsync never finished: nobody of the round may take its names as durable.
        raise OSError(errno.EIO, "directory fsync interrupted")
    if round_.error is not None:
        # A fresh exception per caller: one instance raised in several threads would share a traceback.
        raise OSError(round_.error.errno, round_.error.strerror)

"""Progress on a terminal: a bar per tool call fed by the server's ``notifications/progress``, and per file
uploaded or read in windows.

The bars go to stderr, and only when stderr is a terminal (or ``--progress`` says so), so what a script
reads on stdout stays the report alone. They are not transient: the last state stays on screen.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)


class Bars:
    """The bars of one command; every method is a no-op when disabled."""

    def __init__(self, enabled: bool | None) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        console = Console(stderr=True, force_terminal=True if enabled is True else None)
        self._steps = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}", markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[message]}", markup=False),
            TimeElapsedColumn(),
            console=console,
            disable=not self.enabled,
        )
        self._bytes = Progress(
            TextColumn("{task.description}", markup=False),
            BarColumn(),
            DownloadColumn(binary_units=True),
            console=console,
            disable=not self.enabled,
        )
        self._live: Progress | None = None

    def _start(self, progress: Progress) -> None:
        # One live display at a time: a second would draw over the first.
        if self._live is not progress:
            self.stop()
            progress.start()
            self._live = progress

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def __enter__(self) -> Bars:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def call(self, description: str) -> Callable[[float, float | None, str | None], None]:
        """A bar for one call; the callback takes what a progress notification says."""
        self._start(self._steps)
        task: TaskID = self._steps.add_task(description, total=None, message="")

        def update(progress: float, total: float | None, message: str | None) -> None:
            if message:
                self._steps.update(task, completed=progress, total=total, message=message)
            else:
                self._steps.update(task, completed=progress, total=total)

        return update

    def transfer(self, description: str) -> Callable[[int, int], None]:
        """A bar in bytes, for a file uploaded or read."""
        self._start(self._bytes)
        task: TaskID = self._bytes.add_task(description, total=None)

        def update(done: int, total: int) -> None:
            self._bytes.update(task, completed=done, total=total or None)

        return update

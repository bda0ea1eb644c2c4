"""The vocabulary of a cleanup run: its steps, what each freed, and the progress a caller may follow."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol, get_args

from blobstore.errors import InvalidRequest

Step = Literal["expire", "uploads", "blobs", "orphans"]
STEPS: tuple[Step, ...] = get_args(Step)


class CleanupProgress(Protocol):
    """Receives progress of a run, for a progress bar on large runs."""

    def step_started(self, step: Step, total: int | None) -> None: ...

    def advanced(self, step: Step, count: int) -> None: ...

    def step_finished(self, step: Step) -> None: ...


@dataclass(slots=True)
class StepResult:
    """What one step freed (or, in a dry run, would free).

    ``bytes`` counts only what left storage in this run; ``expired_bytes`` is the size of the artifacts the
    ``expire`` step removed (their blobs are freed, and counted, by the ``blobs`` step once unreferenced).
    """

    step: Step
    items: int = 0
    bytes: int = 0
    details: dict[str, int] = field(default_factory=dict)
    skipped: str | None = None
    expired_bytes: int = 0

    def add(self, name: str, count: int = 1) -> None:
        self.details[name] = self.details.get(name, 0) + count

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "items": self.items,
            "bytes": self.bytes,
            "expired_bytes": self.expired_bytes,
            "details": dict(self.details),
            "skipped": self.skipped,
        }


@dataclass(slots=True)
class CleanupReport:
    dry_run: bool
    grace_seconds: int
    started_at: datetime
    steps: list[StepResult] = field(default_factory=list)

    @property
    def items(self) -> int:
        return sum(step.items for step in self.steps)

    @property
    def bytes(self) -> int:
        """Bytes freed on storage by this run."""
        return sum(step.bytes for step in self.steps)

    @property
    def expired_bytes(self) -> int:
        """Size of the artifacts expired by this run (not itself storage freed)."""
        return sum(step.expired_bytes for step in self.steps)

    def step(self, name: Step) -> StepResult:
        for result in self.steps:
            if result.step == name:
                return result
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "grace_seconds": self.grace_seconds,
            "started_at": self.started_at.isoformat(),
            "items": self.items,
            "bytes": self.bytes,
            "expired_bytes": self.expired_bytes,
            "steps": [step.to_dict() for step in self.steps],
        }


def parse_steps(names: Iterable[str] | None) -> tuple[Step, ...]:
    if not names:
        return STEPS
    chosen = set(names)
    unknown = chosen.difference(STEPS)
    if unknown:
        raise InvalidRequest(f"unknown cleanup step {sorted(unknown)[0]!r}; choose from {', '.join(STEPS)}")
    return tuple(step for step in STEPS if step in chosen)

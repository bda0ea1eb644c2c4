"""Scene cuts (numpy): where a video's picture changes at once, found on small decoded frames.

Sans I/O: the frames come from the PyAV engine as small RGB arrays with their times, one at a time, and
:class:`CutFinder` says where each scene starts. The measure between two frames is the mean absolute
difference of their pixels (0-1), as content-aware detectors measure it. A cut is a difference of at least
:data:`CUT_SCORE`, or one of at least :data:`MIN_SCORE` that stands :data:`RATIO` times above the differences
around it (two frames each side): a hard cut between two pictures that look alike (two pages of a manual)
stands out of a still or slow neighbourhood, where a pan, a scroll or a fade changes every frame a little and
a flash of noise changes them all a lot.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Final

CUT_SCORE: Final = 0.25
"""A difference this large is a cut whatever surrounds it."""
MIN_SCORE: Final = 0.015
"""Below this no change is a cut, however still the frames around it: compression noise, a fade (0.016 a frame
at 4 gray levels, but as much every frame, so never three times its neighbours). A cut between two pages
of a manual (white, with lines of small text) measures 0.016-0.05 at :data:`THUMB_WIDTH`, a scroll of 2-6 px
a frame 0.01-0.017 (bench/views.py)."""
RATIO: Final = 3.0
"""How far a difference must stand above its neighbours' mean to be a cut."""
NEIGHBOURS: Final = 2
"""Frames on each side a difference is compared with."""
THUMB_WIDTH: Final = 64
"""Frames are compared at this width (and their own aspect): enough for a cut, cheap for every frame."""


def difference(a: Any, b: Any) -> float:
    """Mean absolute difference of two small frames of the same shape (uint8 arrays), 0-1."""
    import numpy as np

    if a.shape != b.shape:
        return 1.0
    return float(np.abs(a.astype(np.int16) - b.astype(np.int16)).mean()) / 255.0


@dataclass(slots=True)
class CutFinder:
    """Fed frames in order (:meth:`add`), judges whether each starts a scene; the first frame always does.
    A verdict on a frame waits for :data:`NEIGHBOURS` frames after it, so :meth:`add` returns the verdicts
    ``(time, starts a scene)`` of earlier frames, in order, and :meth:`finish` those of the last ones."""

    adaptive: bool = True
    """Whether a difference is weighed against its neighbours'. Off for frames far apart in time (keyframes
    seconds apart), whose neighbours are other scenes: there every difference of :data:`MIN_SCORE` cuts."""
    _previous: Any = None
    _pending: deque[tuple[float, float]] = field(default_factory=deque)
    """(time, difference to the frame before) of the frames not yet judged."""
    _before: deque[float] = field(default_factory=lambda: deque(maxlen=NEIGHBOURS))

    def add(self, time: float, thumb: Any) -> list[tuple[float, bool]]:
        if self._previous is None:
            self._previous = thumb
            return [(time, True)]
        self._pending.append((time, difference(self._previous, thumb)))
        self._previous = thumb
        verdicts: list[tuple[float, bool]] = []
        while len(self._pending) > NEIGHBOURS:
            verdicts.append(self._judge())
        return verdicts

    def finish(self) -> list[tuple[float, bool]]:
        verdicts: list[tuple[float, bool]] = []
        while self._pending:
            verdicts.append(self._judge())
        return verdicts

    def _judge(self) -> tuple[float, bool]:
        time, score = self._pending.popleft()
        around = [*self._before, *(other for _, other in list(self._pending)[:NEIGHBOURS])]
        self._before.append(score)
        if score >= CUT_SCORE:
            return time, True
        if score < MIN_SCORE:
            return time, False
        if not self.adaptive:
            return time, True
        mean = sum(around) / len(around) if around else 0.0
        return time, score >= RATIO * mean

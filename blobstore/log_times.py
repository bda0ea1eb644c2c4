"""The time of a log line as ISO 8601 text in UTC, the date and time of day made once a second.

Every request writes an access line and most an audit line, each stamped with the current time. Made by
``datetime.now(UTC).isoformat()`` that is about 1.9 µs a line here, a few per cent of a small range read;
with the whole second's text remembered it is the clock's read and one f-string. The text is byte for byte
``datetime.isoformat``'s (``tests/test_log_times.py`` checks it with Hypothesis)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

_last_second: tuple[int, str] = (-1, "")
"""The last whole second written and its text, replaced as one object so that threads share it safely."""


def _second_text(second: int) -> str:
    global _last_second
    last = _last_second
    if last[0] == second:
        return last[1]
    text = datetime.fromtimestamp(second, UTC).replace(tzinfo=None).isoformat()
    _last_second = (second, text)
    return text


def now_micros() -> int:
    """Microseconds since the epoch, now."""
    return time.time_ns() // 1000


def iso_micros(micros: int) -> str:
    """``datetime.isoformat()`` of that UTC moment: microseconds, written only when not zero."""
    second, fraction = divmod(micros, 1_000_000)
    text = _second_text(second)
    return f"{text}.{fraction:06d}+00:00" if fraction else f"{text}+00:00"


def iso_millis(micros: int) -> str:
    """``datetime.isoformat(timespec="milliseconds")`` of that UTC moment (the microseconds cut, not
    rounded)."""
    second, fraction = divmod(micros, 1_000_000)
    return f"{_second_text(second)}.{fraction // 1000:03d}+00:00"

"""Sizes for people: one formatting of byte counts for every edge that prints or describes one."""

from __future__ import annotations

import re
from typing import Final

_UNITS: Final = ("KiB", "MiB", "GiB", "TiB")


def human_bytes(size: int, *, byte_unit: str = "B") -> str:
    """``size`` in binary units with one decimal (``1.5 MiB``), or the exact count below 1 KiB.

    ``byte_unit`` names that exact count: ``B`` in tables, ``bytes`` in prose meant for a model.
    """
    if size < 1024:
        return f"{size} {byte_unit}"
    value = float(size)
    for unit in _UNITS:
        value /= 1024
        if value < 1024 or unit == _UNITS[-1]:
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")


_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]i?b|b)?\s*", re.IGNORECASE)
_FACTORS: Final = {
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}


def parse_bytes(text: str | int) -> int:
    """A size a person wrote, in bytes: ``"10MB"`` (decimal units, 10,000,000), ``"1.5 MiB"`` (binary units),
    ``"512"`` or ``512``. ``ValueError`` for anything else, or for less than one byte."""
    if isinstance(text, int):
        size = text
    else:
        match = _SIZE.fullmatch(text)
        if match is None:
            raise ValueError(
                f"a size is a number with an optional unit (B, KB, MB, GB, KiB, MiB, GiB), not {text!r}"
            )
        size = int(float(match.group(1)) * _FACTORS[(match.group(2) or "b").lower()])
    if size < 1:
        raise ValueError("a size must be at least one byte")
    return size

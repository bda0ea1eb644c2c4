"""Sizes for people: one formatting of byte counts for every edge that prints or describes one."""

from __future__ import annotations

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

"""What must never appear in a log, collected while the tests run, and the search for it.

Tests register every token secret they mint and every payload they upload; servers they start write their
stderr and audit log to files registered here. ``tests/logs`` (after every other test) greps all of it, plus
the in-process log of the whole run, for the secrets, for the payloads (raw marker, base64 at every
alignment, SHA-256) and for anything shaped like a token.
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

TOKEN_SHAPE: Final = re.compile(r"bst_[A-Za-z0-9_-]{16}_[A-Za-z0-9_-]{43}")
WINDOW: Final = 60
"""Bytes of a payload encoded per probe: long enough to be unique, short enough to catch partial dumps."""

_secrets: set[str] = set()
_payloads: list[bytes] = []
_log_files: set[Path] = set()
inprocess_log: Path | None = None
"""The file the whole run's logging records go to (set by ``tests/logs/conftest.py``)."""


def register_secret(token: str) -> None:
    _secrets.add(token)


def register_payload(data: bytes) -> None:
    _payloads.append(data)


def register_log(path: Path) -> Path:
    _log_files.add(path)
    return path


def audit_log_path(directory: Path) -> Path:
    return register_log(directory / "audit.jsonl")


def registered_secrets() -> frozenset[str]:
    return frozenset(_secrets)


def registered_payloads() -> list[bytes]:
    return list(_payloads)


def registered_logs() -> frozenset[Path]:
    return frozenset(_log_files)


@dataclass(frozen=True)
class Needle:
    what: str
    text: str


def secret_needles(token: str) -> list[Needle]:
    # The secret part alone is what grants access; the id part is public and may be logged.
    # Split by position: the URL-safe alphabet of the secret itself contains "_".
    return [Needle("token secret", token[len("bst_") + 17 :])]


def payload_needles(data: bytes) -> list[Needle]:
    needles = [Needle("content sha256", hashlib.sha256(data).hexdigest())]
    marker = data.split(b":", 1)[0]
    if len(marker) >= 16:
        needles.append(Needle("content marker", marker.decode("ascii")))
    middle = max(0, len(data) // 2 - WINDOW)
    for shift in range(3):
        piece = data[middle + shift : middle + shift + WINDOW]
        if len(piece) == WINDOW:
            for encode in (base64.b64encode, base64.urlsafe_b64encode):
                needles.append(Needle("content base64", encode(piece).decode("ascii")))
            needles.append(Needle("content hex", piece.hex()))
    return needles


def find_leaks(text: str, secrets: frozenset[str], payloads: list[bytes]) -> list[str]:
    """Descriptions of everything forbidden found in ``text`` (never the found text itself)."""
    found: list[str] = []
    if TOKEN_SHAPE.search(text):
        found.append("something shaped like a bearer token")
    for secret in secrets:
        found += [n.what for n in secret_needles(secret) if n.text in text]
    for data in payloads:
        found += [n.what for n in payload_needles(data) if n.text in text]
    return found

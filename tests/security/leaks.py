"""What must never appear in a log, collected while the tests run, and the search for it.

Tests register every token secret they mint and every payload they upload; servers they start write their
stderr and audit log to files registered here. At the end of the run every test process sweeps all of it,
every ``*.log`` and ``*.jsonl`` under its temporary directory and its in-process log for the secrets, the
payloads (raw marker, base64 at every alignment, SHA-256) and anything shaped like a token
(``tests/fixtures/log_sweep.py``).
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
"""The file this process's logging records go to (set by ``tests/fixtures/log_sweep.py``)."""


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


def needles(secrets: frozenset[str], payloads: list[bytes]) -> list[Needle]:
    return [n for secret in secrets for n in secret_needles(secret)] + [
        n for data in payloads for n in payload_needles(data)
    ]


def find_needles(text: str, looked_for: list[Needle]) -> list[str]:
    """Descriptions of everything forbidden found in ``text`` (never the found text itself)."""
    found = ["something shaped like a bearer token"] if TOKEN_SHAPE.search(text) else []
    return found + [n.what for n in looked_for if n.text in text]


def find_leaks(text: str, secrets: frozenset[str], payloads: list[bytes]) -> list[str]:
    return find_needles(text, needles(secrets, payloads))


def known_logs(root: Path | None) -> list[Path]:
    """Every log this process knows of: the registered ones, its in-process log, and every ``*.log`` and
    ``*.jsonl`` under ``root`` (its temporary directory)."""
    files = set(_log_files)
    if root is not None:
        files |= {path for pattern in ("*.log", "*.jsonl") for path in root.rglob(pattern)}
    if inprocess_log is not None:
        files.add(inprocess_log)
    return sorted(path for path in files if path.is_file())


def sweep(files: list[Path]) -> dict[str, list[str]]:
    """What of the registered secrets and payloads each of ``files`` holds: path -> descriptions, only the
    files where something was found."""
    looked_for = needles(registered_secrets(), registered_payloads())
    found = {str(path): find_needles(path.read_text(errors="replace"), looked_for) for path in files}
    return {path: what for path, what in found.items() if what}

"""Signed links: a path and an expiry signed with HMAC-SHA256 under a server key.

Whoever holds a signed link may use that one path until the expiry, without a token: the share links of the
web console are ``/share/…`` paths signed here, and signed upload or download targets can be made the same
way. The signature covers the exact path and the expiry (seconds since 1970, UTC), so neither can be changed;
changing the key (:func:`rotate_key`, or another ``BLOBSTORE_LINK_KEY``) revokes every link signed before.

The key is the setting ``BLOBSTORE_LINK_KEY`` when given (replicas that share links must share it), else 32
random bytes kept in ``link-signing.key`` in the data directory (mode 0600), made on first use.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final
from urllib.parse import urlencode

from blobstore.errors import InvalidRequest, LinkRefused

KEY_FILE_NAME: Final = "link-signing.key"
KEY_BYTES: Final = 32
_SIGNATURE_LENGTH: Final = 43
"""Characters of an unpadded URL-safe base64 SHA-256."""


@dataclass(frozen=True, slots=True)
class SignedLink:
    path: str
    expires: int
    """Seconds since 1970 (UTC) after which the link is refused."""
    signature: str

    @property
    def query(self) -> str:
        return urlencode({"expires": self.expires, "sig": self.signature})

    @property
    def target(self) -> str:
        """The path with its query: what to append to the server's base URL."""
        return f"{self.path}?{self.query}"

    @property
    def expires_at(self) -> datetime:
        return datetime.fromtimestamp(self.expires, UTC)


def _check_path(path: str) -> str:
    # The path and the expiry are joined by a newline in the signed message, so a path never holds one.
    if not path.startswith("/") or any(ord(ch) < 0x21 or ord(ch) == 0x7F for ch in path):
        raise InvalidRequest("a signed path starts with '/' and holds no spaces or control characters")
    return path


class LinkSigner:
    """Signs and verifies ``(path, expiry)`` pairs under one key."""

    def __init__(self, key: bytes) -> None:
        if len(key) < 16:
            raise ValueError("a link key has at least 16 bytes")
        self._key = key

    def _mac(self, message: str) -> str:
        digest = hmac.new(self._key, message.encode("utf-8"), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")

    def sign(self, path: str, expires: datetime | int) -> SignedLink:
        moment = int(expires.timestamp()) if isinstance(expires, datetime) else int(expires)
        return SignedLink(_check_path(path), moment, self._mac(f"{_check_path(path)}\n{moment}"))

    def verify(self, path: str, expires: str | int | None, signature: str | None, *, now: datetime) -> int:
        """The expiry of a valid link for ``path``; ``LinkRefused`` when it is expired, altered or signed
        under another key (one answer for all three: the holder of a bad link learns nothing more)."""
        text = str(expires) if expires is not None else ""
        if not text.isdigit() or len(text) > 12 or signature is None or len(signature) != _SIGNATURE_LENGTH:
            raise LinkRefused()
        moment = int(text)
        try:
            expected = self._mac(f"{_check_path(path)}\n{moment}")
        except InvalidRequest:
            raise LinkRefused() from None
        # Bytes: compare_digest refuses a str with non-ASCII characters, and a link may hold anything.
        if not hmac.compare_digest(expected.encode(), signature.encode("utf-8", "replace")):
            raise LinkRefused()
        if moment <= now.timestamp():
            raise LinkRefused("the link has expired")
        return moment

    def derive(self, purpose: str) -> bytes:
        """A key for another purpose (e.g. the console's CSRF tokens), independent of the link signatures."""
        return hmac.new(self._key, f"derive:{purpose}".encode(), hashlib.sha256).digest()


def _write_key(path: Path, key: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(base64.urlsafe_b64encode(key))
        out.flush()
        os.fsync(out.fileno())
    # Replaced at once: a server reading the file meanwhile sees the old key or the new one, never half.
    temporary.replace(path)


def load_key(data_dir: Path, configured: str | None = None) -> bytes:
    """The link key: ``configured`` (the setting) when given, else the data directory's key file (made on
    first use). Blocking: file I/O."""
    if configured is not None:
        return configured.encode("utf-8")
    path = data_dir / KEY_FILE_NAME
    try:
        text = path.read_bytes().strip()
    except FileNotFoundError:
        key = secrets.token_bytes(KEY_BYTES)
        _write_key(path, key)
        return key
    return base64.urlsafe_b64decode(text)


def rotate_key(data_dir: Path) -> bytes:
    """A new key in the data directory's key file: every link signed under the old one is refused."""
    key = secrets.token_bytes(KEY_BYTES)
    _write_key(data_dir / KEY_FILE_NAME, key)
    return key

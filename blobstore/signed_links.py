"""Signed links: a path and an expiry (and, for a share link, who minted it) signed with HMAC-SHA256 under a
server key.

Whoever holds a signed link may use that one path until the expiry, without a token: the share links of the
web console are ``/share/…`` paths signed here, and signed upload or download targets are made the same way.
The signature covers the exact path, the expiry (seconds since 1970, UTC) and the minter (``by``: the id of
the token that made the link, never its secret), so none of them can be changed; changing the key revokes
every link signed before.

The key is the setting ``BLOBSTORE_LINK_KEY`` when given, else 32 random bytes kept in the metadata database,
so that every replica of it agrees (:mod:`blobstore.link_keys`). A data directory of an earlier version may
hold ``link-signing.key``: the first server to store a key in the database takes that one
(:func:`read_key_file`), so links made before keep working.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
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
    minter: str | None = None
    """Who made it (``by`` in the query), when the link says: the minting token's id, or an actor name."""

    @property
    def query(self) -> str:
        fields: dict[str, str | int] = {"expires": self.expires}
        if self.minter is not None:
            fields["by"] = self.minter
        fields["sig"] = self.signature
        return urlencode(fields)

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


def _message(path: str, moment: int, minter: str | None) -> str:
    # A link without a minter signs what links signed before minters existed; one with signs a third line, so
    # that neither can be passed off as the other.
    text = f"{_check_path(path)}\n{moment}"
    if minter is None:
        return text
    if not minter or any(ord(ch) < 0x21 or ord(ch) == 0x7F for ch in minter):
        raise InvalidRequest("a link's minter holds no spaces or control characters")
    return f"{text}\n{minter}"


class LinkSigner:
    """Signs and verifies ``(path, expiry)`` pairs under one key."""

    def __init__(self, key: bytes) -> None:
        if len(key) < 16:
            raise ValueError("a link key has at least 16 bytes")
        self._key = key

    def _mac(self, message: str) -> str:
        digest = hmac.new(self._key, message.encode("utf-8"), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")

    def sign(self, path: str, expires: datetime | int, *, minter: str | None = None) -> SignedLink:
        moment = int(expires.timestamp()) if isinstance(expires, datetime) else int(expires)
        return SignedLink(path, moment, self._mac(_message(path, moment, minter)), minter)

    def verify(
        self,
        path: str,
        expires: str | int | None,
        signature: str | None,
        *,
        now: datetime,
        minter: str | None = None,
    ) -> int:
        """The expiry of a valid link for ``path`` (minted by ``minter``, when the link names one);
        ``LinkRefused`` when it is expired, altered or signed under another key (one answer for all three:
        the holder of a bad link learns nothing more)."""
        text = str(expires) if expires is not None else ""
        if not text.isdigit() or len(text) > 12 or signature is None or len(signature) != _SIGNATURE_LENGTH:
            raise LinkRefused()
        moment = int(text)
        try:
            expected = self._mac(_message(path, moment, minter))
        except InvalidRequest:
            raise LinkRefused() from None
        # Bytes: compare_digest refuses a str with non-ASCII characters, and a link may hold anything.
        if not hmac.compare_digest(expected.encode(), signature.encode("utf-8", "replace")):
            raise LinkRefused()
        if moment <= now.timestamp():
            raise LinkRefused("the link has expired")
        return moment


def new_key() -> bytes:
    return secrets.token_bytes(KEY_BYTES)


def key_text(key: bytes) -> str:
    """A key as the metadata database keeps it (URL-safe base64, as the key file did)."""
    return base64.urlsafe_b64encode(key).decode("ascii")


def key_from_text(text: str) -> bytes:
    return base64.urlsafe_b64decode(text.strip().encode("ascii"))


def read_key_file(data_dir: Path) -> bytes | None:
    """The key an earlier version kept in ``data_dir/link-signing.key``, if it is usable. Blocking."""
    try:
        text = (data_dir / KEY_FILE_NAME).read_text(encoding="ascii")
    except (FileNotFoundError, NotADirectoryError, UnicodeDecodeError):
        return None
    try:
        key = key_from_text(text)
    except (binascii.Error, ValueError):
        return None
    return key if len(key) >= 16 else None

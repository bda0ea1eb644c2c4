"""Console sessions, kept in the metadata database so that every replica knows them.

Logging in makes a session: a random id of 256 bits, which the cookie carries and the database keeps only as
its SHA-256, the token it acts as (its id; none in local mode), a CSRF token of its own, an idle end
(``BLOBSTORE_CONSOLE_SESSION_IDLE_SECONDS`` after the last use, moved on at most once every
:data:`TOUCH_SECONDS` to keep writes few) and an absolute end (``BLOBSTORE_CONSOLE_SESSION_SECONDS`` after
login, or the token's expiry if that is sooner). Every lookup joins the token's row: a revoked or expired
token ends its sessions at once, on every replica; a local-mode session ends with local mode. Log out deletes
the session, so its cookie and CSRF token open nothing afterwards. Cleanup deletes ended sessions.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

from blobstore.auth import LOCAL_CALLER, Authenticator, is_token_id, token_state
from blobstore.clock import Clock
from blobstore.errors import Unauthorized
from blobstore.models import Caller
from blobstore.records import ConsoleSessionRecords

SESSION_ID_BYTES: Final = 32
CSRF_BYTES: Final = 32
TOUCH_SECONDS: Final = 60
_SESSION_ID = re.compile(r"[A-Za-z0-9_-]{43}")
"""What :func:`secrets.token_urlsafe` of 32 bytes gives; anything else is looked up nowhere."""


def hash_session_id(session_id: str) -> str:
    return hashlib.sha256(session_id.encode("ascii")).hexdigest()


@dataclass(frozen=True, slots=True)
class OpenSession:
    """A live session, as a request found it."""

    id_hash: str
    caller: Caller
    csrf: str
    flash: dict[str, Any] | None

    @property
    def is_local(self) -> bool:
        return self.caller == LOCAL_CALLER


class ConsoleSessions:
    """Makes, finds, moves on and ends console sessions."""

    def __init__(
        self,
        repo: ConsoleSessionRecords,
        authenticator: Authenticator,
        *,
        idle_seconds: int,
        absolute_seconds: int,
        clock: Clock,
    ) -> None:
        self.repo = repo
        self.authenticator = authenticator
        self.idle = timedelta(seconds=idle_seconds)
        self.absolute = timedelta(seconds=absolute_seconds)
        self.clock = clock
        self.touch = timedelta(seconds=min(TOUCH_SECONDS, idle_seconds / 4))

    async def start(self, caller: Caller) -> str:
        """A new session for ``caller`` (a token's, or local mode's): its id, for the cookie alone."""
        session_id = secrets.token_urlsafe(SESSION_ID_BYTES)
        now = self.clock()
        ends = now + self.absolute
        if caller.expires_at is not None:
            ends = min(ends, caller.expires_at)
        await self.repo.insert_console_session(
            id_hash=hash_session_id(session_id),
            token_id=caller.actor if is_token_id(caller.actor) else None,
            csrf=secrets.token_hex(CSRF_BYTES),
            created_at=now,
            idle_until=min(now + self.idle, ends),
            expires_at=ends,
        )
        return session_id

    async def open(self, session_id: str, *, client_host: str | None) -> OpenSession | None:
        """The live session of this id, its idle end moved on; None when there is none (never made, logged
        out, ended by time, its token revoked or expired, local mode over)."""
        if not _SESSION_ID.fullmatch(session_id):
            return None
        id_hash = hash_session_id(session_id)
        record = await self.repo.find_console_session(id_hash)
        now = self.clock()
        if record is None or record.idle_until <= now:
            return None
        if record.token is None:
            try:
                caller = await self.authenticator.authenticate(None, client_host=client_host)
            except Unauthorized:
                return None  # a token exists now (or this client may not use local mode)
        else:
            token = record.token
            if token_state(token, now) != "active":
                return None
            caller = Caller(
                namespace=token.namespace, actor=token.id, scopes=token.scopes, expires_at=token.expires_at
            )
        moved = min(now + self.idle, record.expires_at)
        if moved - record.idle_until >= self.touch:
            await self.repo.touch_console_session(id_hash, idle_until=moved)
        return OpenSession(id_hash=id_hash, caller=caller, csrf=record.csrf, flash=record.flash)

    async def end(self, id_hash: str) -> None:
        await self.repo.delete_console_session(id_hash)

    async def end_id(self, session_id: str) -> None:
        """End the session of a cookie's value, whoever's it is (two session cookies: neither is trusted)."""
        if _SESSION_ID.fullmatch(session_id):
            await self.repo.delete_console_session(hash_session_id(session_id))

    async def keep_outcome(self, session: OpenSession, outcome: dict[str, Any]) -> None:
        """What a change did, for the page its redirect lands on (``POST``/redirect/``GET``)."""
        await self.repo.set_console_flash(session.id_hash, outcome)

    async def take_outcome(self, session: OpenSession) -> dict[str, Any] | None:
        """The outcome kept for this page, once: a reload shows the page without it."""
        if session.flash is None:
            return None
        await self.repo.set_console_flash(session.id_hash, None)
        return session.flash

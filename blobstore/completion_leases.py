"""Completion leases: who is joining an upload's chunks, and whether that completer is still alive.

The completer of an upload holds a lease (owner id and expiry in the upload row) and renews it every quarter
lease while it joins. A completion whose lease ran out belongs to a process that died, and goes back to
``open``. A server that holds the data-directory lock (SQLite) knows that a completion started by another lock
holder is dead without waiting for its lease: owner ids say whether their process held the lock.
"""

from __future__ import annotations

import logging
import secrets
from datetime import datetime, timedelta

import anyio

from blobstore.audit import AuditLog
from blobstore.clock import Clock
from blobstore.models import UploadSession, UploadState
from blobstore.records import LeaseRecords

logger = logging.getLogger("blobstore.uploads")

LOCK_HOLDER = "L"
"""Owner-id prefix of completions started by a process holding the data-directory lock."""


class CompletionLeases:
    def __init__(
        self,
        *,
        repo: LeaseRecords,
        audit: AuditLog,
        clock: Clock,
        lease_seconds: float,
        sole_server: bool = False,
    ) -> None:
        self.repo = repo
        self.audit = audit
        self.clock = clock
        self.lease = timedelta(seconds=lease_seconds)
        self.sole_server = sole_server
        """True when this process holds the data-directory lock: no other server uses this database."""
        self.instance = secrets.token_hex(8)
        """This process's part of every completion owner id it writes."""

    def _new_owner(self) -> str:
        kind = LOCK_HOLDER if self.sole_server else "P"
        return f"{kind}:{self.instance}:{secrets.token_hex(6)}"

    async def begin(self, upload_id: str) -> str | None:
        """Move an ``open`` upload to ``completing`` under a new owner id, returned; None when another request
        won the compare-and-set."""
        owner = self._new_owner()
        now = self.clock()
        if await self.repo.begin_completion(upload_id, owner=owner, lease_until=now + self.lease, now=now):
            return owner
        return None

    def _owner_is_dead(self, owner: str | None) -> bool:
        """True when ``owner`` is known dead without its lease running out: it held the data-directory lock
        as another process, and this process holds that lock now."""
        if owner is None or not self.sole_server:
            return False
        kind, _, rest = owner.partition(":")
        return kind == LOCK_HOLDER and rest.partition(":")[0] != self.instance

    def abandoned(self, session: UploadSession, now: datetime) -> bool:
        """Whether ``session`` is ``completing`` under a completer that is gone."""
        if session.state is not UploadState.COMPLETING:
            return False
        lease_until = session.completion_lease_until
        return lease_until is None or lease_until <= now or self._owner_is_dead(session.completion_owner)

    async def recover(self, session: UploadSession, *, actor: str) -> bool:
        """Roll an abandoned completion of ``session`` back to ``open``; True when this call did.

        The compare-and-set re-checks the owner (and, unless the owner is known dead, the expiry) in the
        statement that writes, so a live completer that renewed its lease meanwhile keeps it.
        """
        now = self.clock()
        if not self.abandoned(session, now):
            return False
        released = await self.repo.release_completion(
            session.id,
            owner=session.completion_owner,
            now=now,
            expired_only=not self._owner_is_dead(session.completion_owner),
        )
        if released:
            logger.warning("an abandoned completion went back to open (its completer stopped renewing)")
            self.audit.record(
                actor=actor, namespace=session.namespace, action="complete_recover", result="ok"
            )
        return released

    async def release(self, upload_id: str, owner: str) -> None:
        """Give the upload back (``open``) after ``owner``'s completion failed."""
        await self.repo.release_completion(upload_id, owner=owner, now=self.clock(), expired_only=False)

    async def keep(self, upload_id: str, owner: str) -> None:
        """Renew ``owner``'s completion lease every quarter lease until cancelled or the lease is gone."""
        while True:
            await anyio.sleep(self.lease.total_seconds() / 4)
            try:
                kept = await self.repo.renew_completion(
                    upload_id, owner=owner, lease_until=self.clock() + self.lease
                )
            except Exception as exc:  # a database hiccup: the next beat tries again
                logger.warning("could not renew a completion lease: %s", type(exc).__name__)
                continue
            if not kept:
                # Taken over; the commit will find out (CompletionLost) and nothing is committed twice.
                return

"""Signing keys every replica must agree on: made once, race-free, by the first one that needs a key."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

from blobstore.metadata.repository.base import RepositoryBase
from blobstore.metadata.tables import signing_keys


class SigningKeyRepository(RepositoryBase):
    """Keys by purpose (``links``: share links and upload targets)."""

    async def signing_key(self, purpose: str) -> str | None:
        row = await self._first(sa.select(signing_keys.c.secret).where(signing_keys.c.purpose == purpose))
        return None if row is None else str(row[0])

    async def ensure_signing_key(self, purpose: str, secret: str, *, now: datetime) -> str:
        """The key of ``purpose``: ``secret`` if none was stored yet, else the one that was. Replicas that
        start together each offer their own; the first insert wins and every one reads the winner."""
        async with self._engine.begin() as conn:
            await conn.execute(
                self._insert(signing_keys)
                .values(purpose=purpose, secret=secret, updated_at=now)
                .on_conflict_do_nothing(index_elements=["purpose"])
            )
            stored = await conn.scalar(
                sa.select(signing_keys.c.secret).where(signing_keys.c.purpose == purpose)
            )
        if stored is None:
            raise AssertionError("a signing key inserted or kept in this transaction vanished")
        return str(stored)

    async def replace_signing_key(self, purpose: str, secret: str, *, now: datetime) -> None:
        """A new key of ``purpose`` (rotation): what was signed under the old one is refused from then on."""
        async with self._engine.begin() as conn:
            insert = self._insert(signing_keys).values(purpose=purpose, secret=secret, updated_at=now)
            await conn.execute(
                insert.on_conflict_do_update(
                    index_elements=["purpose"], set_={"secret": secret, "updated_at": now}
                )
            )

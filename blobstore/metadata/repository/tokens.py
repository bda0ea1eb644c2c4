"""API token rows, found by the hash of their secret."""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from blobstore.metadata.repository import rows
from blobstore.metadata.repository.base import RepositoryBase
from blobstore.metadata.tables import console_sessions, tokens
from blobstore.models import TokenRecord


class TokenRepository(RepositoryBase):
    """API token rows."""

    async def insert_token(self, record: TokenRecord, secret_hash: str) -> None:
        async with self._engine.begin() as conn:
            await conn.execute(
                sa.insert(tokens).values(
                    id=record.id,
                    namespace=record.namespace,
                    scopes=rows.scopes_text(record.scopes),
                    secret_hash=secret_hash,
                    description=record.description,
                    created_at=record.created_at,
                    expires_at=record.expires_at,
                    revoked_at=record.revoked_at,
                )
            )

    async def find_token(self, secret_hash: str) -> TokenRecord | None:
        """The token with this secret hash, revoked or expired ones included: the caller checks both."""
        # Every authenticated request asks: the single-row path (one worker call on SQLite).
        row = await self._first(sa.select(tokens).where(tokens.c.secret_hash == secret_hash))
        return None if row is None else rows.token(row._mapping)

    async def get_token(self, token_id: str) -> TokenRecord | None:
        """The token with this id, revoked or expired ones included: the caller checks both."""
        # Every share link minted by a token asks when it is opened: the single-row path.
        row = await self._first(_by_id(), {"id": token_id})
        return None if row is None else rows.token(row._mapping)

    async def list_tokens(self, namespace: str | None = None) -> list[TokenRecord]:
        """All tokens (revoked ones too), oldest first, optionally of one namespace."""
        query = sa.select(tokens).order_by(tokens.c.created_at, tokens.c.id)
        if namespace is not None:
            query = query.where(tokens.c.namespace == namespace)
        async with self._reader.connect() as conn:
            selected = (await conn.execute(query)).all()
        return [rows.token(row._mapping) for row in selected]

    async def revoke_token(self, token_id: str, *, now: datetime) -> bool:
        """True when the token existed and was not revoked yet. Its console sessions are deleted with it (a
        session's lookup checks its token anyway, on every replica)."""
        async with self._engine.begin() as conn:
            result = await conn.execute(
                sa.update(tokens)
                .where(tokens.c.id == token_id, tokens.c.revoked_at.is_(None))
                .values(revoked_at=now)
            )
            await conn.execute(sa.delete(console_sessions).where(console_sessions.c.token_id == token_id))
        return result.rowcount == 1

    async def count_tokens(self, *, now: datetime | None = None) -> int:
        """Tokens that are neither revoked nor expired at ``now`` (default: the current time)."""
        moment = now if now is not None else datetime.now(UTC)
        # Asked every few seconds by every server (the authenticator's cache): the single-row path.
        row = await self._first(_count_active(), {"now": moment})
        return int(row[0] or 0) if row is not None else 0


@functools.cache
def _count_active() -> sa.Select[Any]:
    """Built once, the time a bound parameter: SQLAlchemy reuses its compiled form and its cache key."""
    return (
        sa.select(sa.func.count())
        .select_from(tokens)
        .where(
            tokens.c.revoked_at.is_(None),
            sa.or_(
                tokens.c.expires_at.is_(None),
                tokens.c.expires_at > sa.bindparam("now", type_=tokens.c.expires_at.type),
            ),
        )
    )


@functools.cache
def _by_id() -> sa.Select[Any]:
    return sa.select(tokens).where(tokens.c.id == sa.bindparam("id"))

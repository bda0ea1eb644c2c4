"""Console session rows: made at login, found by the hash of the cookie's id together with their token, moved
on by use, deleted at log out, with their token, or by cleanup once ended."""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from blobstore.metadata.repository import rows
from blobstore.metadata.repository.base import RepositoryBase
from blobstore.metadata.tables import console_sessions, tokens
from blobstore.models import ConsoleSessionRecord


class ConsoleSessionRepository(RepositoryBase):
    """Console sessions, shared by every replica of the database."""

    async def insert_console_session(
        self,
        *,
        id_hash: str,
        token_id: str | None,
        csrf: str,
        created_at: datetime,
        idle_until: datetime,
        expires_at: datetime,
    ) -> None:
        async with self._engine.begin() as conn:
            await conn.execute(
                sa.insert(console_sessions).values(
                    id_hash=id_hash,
                    token_id=token_id,
                    csrf=csrf,
                    created_at=created_at,
                    idle_until=idle_until,
                    expires_at=expires_at,
                )
            )

    async def find_console_session(self, id_hash: str) -> ConsoleSessionRecord | None:
        """The session with this id hash and its token's row (revoked or expired ones too: the caller checks
        both, and the idle end), or None."""
        # Every console page and bridged request asks: the single-row path (one worker call on SQLite).
        row = await self._first(_with_token(), {"id_hash": id_hash})
        return None if row is None else rows.console_session(row._mapping)

    async def touch_console_session(self, id_hash: str, *, idle_until: datetime) -> None:
        """Move the idle end on (the caller keeps it at or before the absolute end)."""
        async with self._engine.begin() as conn:
            await conn.execute(
                sa.update(console_sessions)
                .where(console_sessions.c.id_hash == id_hash)
                .values(idle_until=idle_until)
            )

    async def set_console_flash(self, id_hash: str, flash: dict[str, Any] | None) -> None:
        """Keep (or, with None, drop) the outcome a session's next page shows."""
        # SQL NULL for none (a bare None would be stored as the JSON value null).
        value = sa.null() if flash is None else flash
        async with self._engine.begin() as conn:
            await conn.execute(
                sa.update(console_sessions).where(console_sessions.c.id_hash == id_hash).values(flash=value)
            )

    async def delete_console_session(self, id_hash: str) -> bool:
        """True when the session existed."""
        async with self._engine.begin() as conn:
            result = await conn.execute(
                sa.delete(console_sessions).where(console_sessions.c.id_hash == id_hash)
            )
        return result.rowcount == 1

    async def remove_ended_console_sessions(self, *, now: datetime) -> int:
        """Delete the sessions ended by ``now`` (their idle end, which is never past the absolute one)."""
        async with self._engine.begin() as conn:
            result = await conn.execute(
                sa.delete(console_sessions).where(console_sessions.c.idle_until <= now)
            )
        return int(result.rowcount or 0)

    async def count_ended_console_sessions(self, *, now: datetime) -> int:
        row = await self._first(
            sa.select(sa.func.count())
            .select_from(console_sessions)
            .where(console_sessions.c.idle_until <= now)
        )
        return int(row[0] or 0) if row is not None else 0


@functools.cache
def _with_token() -> sa.Select[Any]:
    """Built once, the id hash a bound parameter: SQLAlchemy reuses its compiled form."""
    token_columns = [column.label(f"token__{column.name}") for column in tokens.c]
    return (
        sa.select(console_sessions, *token_columns)
        .select_from(console_sessions.outerjoin(tokens, tokens.c.id == console_sessions.c.token_id))
        .where(console_sessions.c.id_hash == sa.bindparam("id_hash"))
    )

"""Console session rows, on SQLite and PostgreSQL: found with their token's row, moved on, given an outcome
and cleared, deleted at log out, with their token's revocation, and by cleanup once ended."""

from __future__ import annotations

from datetime import timedelta

import sqlalchemy as sa

from blobstore.metadata.repository import MetadataRepository
from tests.metadata.helpers import T0
from tests.metadata.test_tokens import token


async def start(repo: MetadataRepository, id_hash: str, token_id: str | None, *, minutes: int = 30) -> None:
    await repo.insert_console_session(
        id_hash=id_hash,
        token_id=token_id,
        csrf="c" * 64,
        created_at=T0,
        idle_until=T0 + timedelta(minutes=minutes),
        expires_at=T0 + timedelta(hours=12),
    )


async def test_a_session_is_found_with_its_tokens_row_or_none_in_local_mode(repo: MetadataRepository) -> None:
    record = token("t1", expires_at=T0 + timedelta(days=1))
    await repo.insert_token(record, "1" * 64)
    await start(repo, "a" * 64, "t1")
    await start(repo, "b" * 64, None)

    found = await repo.find_console_session("a" * 64)
    assert found is not None
    assert found.token == record
    assert (found.csrf, found.created_at, found.flash) == ("c" * 64, T0, None)
    assert found.idle_until == T0 + timedelta(minutes=30)
    assert found.expires_at == T0 + timedelta(hours=12)
    local = await repo.find_console_session("b" * 64)
    assert local is not None
    assert local.token is None
    assert await repo.find_console_session("z" * 64) is None


async def test_touch_outcome_and_delete(repo: MetadataRepository) -> None:
    await start(repo, "a" * 64, None)
    await repo.touch_console_session("a" * 64, idle_until=T0 + timedelta(minutes=45))
    await repo.set_console_flash("a" * 64, {"notice": "done", "n": [1, 2]})
    found = await repo.find_console_session("a" * 64)
    assert found is not None
    assert found.idle_until == T0 + timedelta(minutes=45)
    assert found.flash == {"notice": "done", "n": [1, 2]}
    await repo.set_console_flash("a" * 64, None)
    cleared = await repo.find_console_session("a" * 64)
    assert cleared is not None
    assert cleared.flash is None
    async with repo.engine.connect() as conn:
        nulls = await conn.execute(sa.text("SELECT count(*) FROM console_sessions WHERE flash IS NULL"))
        assert nulls.scalar_one() == 1  # SQL NULL, not the JSON value null

    assert await repo.delete_console_session("a" * 64)
    assert not await repo.delete_console_session("a" * 64)
    assert await repo.find_console_session("a" * 64) is None


async def test_revoking_a_token_deletes_its_sessions_only(repo: MetadataRepository) -> None:
    await repo.insert_token(token("t1"), "1" * 64)
    await repo.insert_token(token("t2"), "2" * 64)
    await start(repo, "a" * 64, "t1")
    await start(repo, "b" * 64, "t1")
    await start(repo, "c" * 64, "t2")

    assert await repo.revoke_token("t1", now=T0)

    assert await repo.find_console_session("a" * 64) is None
    assert await repo.find_console_session("b" * 64) is None
    assert await repo.find_console_session("c" * 64) is not None


async def test_cleanup_removes_ended_sessions(repo: MetadataRepository) -> None:
    await start(repo, "a" * 64, None, minutes=10)
    await start(repo, "b" * 64, None, minutes=40)
    moment = T0 + timedelta(minutes=30)

    assert await repo.count_ended_console_sessions(now=moment) == 1
    assert await repo.remove_ended_console_sessions(now=moment) == 1
    assert await repo.remove_ended_console_sessions(now=moment) == 0
    assert await repo.find_console_session("a" * 64) is None
    assert await repo.find_console_session("b" * 64) is not None


async def test_a_token_is_found_by_id(repo: MetadataRepository) -> None:
    record = token("t1")
    await repo.insert_token(record, "1" * 64)
    assert await repo.get_token("t1") == record
    assert await repo.get_token("t2") is None

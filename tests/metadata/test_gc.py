"""Expiry, unreferenced-blob marking, claiming (tombstones) and the races between GC and dedup."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
import sqlalchemy as sa

from blobstore.metadata.repository import MetadataRepository
from blobstore.metadata.tables import artifacts, blobs
from tests.fixtures.waiting import wait_until_async
from tests.metadata.helpers import T0, blob_info, new_artifact

LATER = T0 + timedelta(days=3)
LOCK_WAIT_SECONDS = 60.0


async def orphan_blob(repo: MetadataRepository, content: bytes) -> int:
    """Commit and delete an artifact, leaving its blob unreferenced and marked at T0."""
    result = await repo.commit_artifact(blob=blob_info(content), artifact=new_artifact())
    await repo.delete_artifact("ns", result.artifact.id)
    await repo.mark_unreferenced_blobs(now=T0)
    return result.blob.id


async def test_expire_deletes_expired_unpinned_artifacts_in_batches(repo: MetadataRepository) -> None:
    expired = [
        (await repo.commit_artifact(blob=blob_info(b"x"), artifact=new_artifact(expires_at=T0))).artifact.id
        for _ in range(5)
    ]
    pinned = await repo.commit_artifact(
        blob=blob_info(b"x"), artifact=new_artifact(expires_at=T0, pinned=True)
    )
    alive = await repo.commit_artifact(blob=blob_info(b"x"), artifact=new_artifact(expires_at=LATER))

    first = await repo.expire_artifacts(now=T0, limit=3)
    second = await repo.expire_artifacts(now=T0, limit=3)
    third = await repo.expire_artifacts(now=T0, limit=3)

    assert (len(first), len(second), third) == (3, 2, [])
    assert sorted(a.id for a in first + second) == sorted(expired)
    assert await repo.get_artifact("ns", pinned.artifact.id, now=LATER) is not None
    assert await repo.get_artifact("ns", alive.artifact.id, now=T0) is not None


async def test_mark_sets_grace_start_once_on_unreferenced_live_blobs(repo: MetadataRepository) -> None:
    kept = await repo.commit_artifact(blob=blob_info(b"kept"), artifact=new_artifact())
    dropped = await repo.commit_artifact(blob=blob_info(b"dropped"), artifact=new_artifact())
    await repo.delete_artifact("ns", dropped.artifact.id)

    assert await repo.mark_unreferenced_blobs(now=T0) == 1
    assert await repo.mark_unreferenced_blobs(now=LATER) == 0

    async with repo.engine.connect() as conn:
        rows = (await conn.execute(sa.select(blobs.c.id, blobs.c.unreferenced_since))).all()
    marks = {blob_id: mark for blob_id, mark in rows}
    assert marks == {kept.blob.id: None, dropped.blob.id: T0}


async def test_claim_tombstones_only_blobs_past_the_grace_period(repo: MetadataRepository) -> None:
    blob_id = await orphan_blob(repo, b"old orphan")

    assert (
        await repo.claim_unreferenced_blobs(older_than=T0 - timedelta(seconds=1), now=LATER, limit=10) == []
    )
    # Inclusive: unreferenced for exactly the grace period is enough (a zero grace frees what it just marked).
    claimed = await repo.claim_unreferenced_blobs(older_than=T0, now=LATER, limit=10)

    assert [b.id for b in claimed] == [blob_id]
    assert claimed[0].state == "tombstoned"
    assert await repo.claim_unreferenced_blobs(older_than=LATER, now=LATER, limit=10) == []
    assert [b.id for b in await repo.list_tombstoned_blobs(limit=10)] == [blob_id]


async def test_claim_respects_limit(repo: MetadataRepository) -> None:
    ids = [await orphan_blob(repo, f"orphan {i}".encode()) for i in range(5)]

    first = await repo.claim_unreferenced_blobs(older_than=LATER, now=LATER, limit=2)
    rest = await repo.claim_unreferenced_blobs(older_than=LATER, now=LATER, limit=10)

    assert len(first) == 2
    assert sorted(b.id for b in first + rest) == sorted(ids)


async def test_tombstoned_blob_is_never_deduplicated_onto(repo: MetadataRepository) -> None:
    blob_id = await orphan_blob(repo, b"reborn content")
    [claimed] = await repo.claim_unreferenced_blobs(older_than=LATER, now=LATER, limit=10)
    assert claimed.id == blob_id

    fresh = blob_info(b"reborn content")
    result = await repo.commit_artifact(blob=fresh, artifact=new_artifact())

    assert result.deduplicated is False
    assert result.blob.id != blob_id
    assert result.blob.info.key == fresh.key
    assert result.blob.state == "live"
    again = await repo.commit_artifact(blob=blob_info(b"reborn content"), artifact=new_artifact())
    assert again.deduplicated is True
    assert again.blob.id == result.blob.id
    # The tombstoned row is still droppable: the new artifact references the new generation only.
    assert await repo.drop_blob(blob_id)
    assert await repo.get_blob(blob_id) is None


async def test_claim_rechecks_references_and_clears_a_stale_mark(repo: MetadataRepository) -> None:
    blob_id = await orphan_blob(repo, b"revived")
    # A reference that appeared without clearing the mark (the mark raced with a commit).
    async with repo.engine.begin() as conn:
        await conn.execute(
            sa.insert(artifacts).values(
                id="late-ref",
                namespace="ns",
                name="n",
                mime_type="text/plain",
                size=7,
                sha256="0" * 64,
                blob_id=blob_id,
                created_at=T0,
                user_metadata={},
                media={},
            )
        )

    assert await repo.claim_unreferenced_blobs(older_than=LATER, now=LATER, limit=10) == []
    async with repo.engine.connect() as conn:
        mark = await conn.scalar(sa.select(blobs.c.unreferenced_since).where(blobs.c.id == blob_id))
    assert mark is None


async def test_drop_blob_only_removes_tombstoned_rows(repo: MetadataRepository) -> None:
    live = await repo.commit_artifact(blob=blob_info(b"live"), artifact=new_artifact())
    orphan_id = await orphan_blob(repo, b"dead")

    assert not await repo.drop_blob(live.blob.id)
    assert not await repo.drop_blob(orphan_id)
    await repo.claim_unreferenced_blobs(older_than=LATER, now=LATER, limit=10)
    assert await repo.drop_blob(orphan_id)
    assert not await repo.drop_blob(orphan_id)
    assert await repo.get_blob(live.blob.id) is not None


async def test_concurrent_dedups_onto_a_marked_blob_all_succeed(repo: MetadataRepository) -> None:
    blob_id = await orphan_blob(repo, b"popular")

    results = await asyncio.gather(
        *(repo.commit_artifact(blob=blob_info(b"popular"), artifact=new_artifact()) for _ in range(6))
    )

    assert all(r.deduplicated and r.blob.id == blob_id for r in results)
    assert await repo.claim_unreferenced_blobs(older_than=LATER, now=LATER, limit=10) == []


async def test_known_storage_keys_handles_more_keys_than_one_batch(repo: MetadataRepository) -> None:
    first = await repo.commit_artifact(blob=blob_info(b"k1"), artifact=new_artifact())
    second = await repo.commit_artifact(blob=blob_info(b"k2"), artifact=new_artifact())
    unknown = [f"zz/zz/{i:04d}" for i in range(1200)]
    keys = [*unknown[:700], first.blob.info.key, *unknown[700:], second.blob.info.key]

    assert await repo.known_storage_keys(keys) == {first.blob.info.key, second.blob.info.key}
    assert await repo.known_storage_keys([]) == set()


async def test_advisory_lock_is_exclusive_until_released(repo: MetadataRepository) -> None:
    async with repo.try_advisory_lock("cleanup") as first:
        assert first is True
        async with repo.try_advisory_lock("cleanup") as second:
            assert second is (repo.dialect == "sqlite")
        async with repo.try_advisory_lock("verify") as other_name:
            assert other_name is True
    async with repo.try_advisory_lock("cleanup") as again:
        assert again is True


# Row locks are PostgreSQL's; SQLite serializes writers instead.
postgresql_only = pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)


@postgresql_only
async def test_claim_skips_a_blob_held_by_an_in_flight_commit(repo: MetadataRepository) -> None:
    blob_id = await orphan_blob(repo, b"being deduplicated")

    async with repo.engine.connect() as commit_tx:
        await commit_tx.execute(sa.select(blobs.c.id).where(blobs.c.id == blob_id).with_for_update(read=True))
        skipped = await repo.claim_unreferenced_blobs(older_than=LATER, now=LATER, limit=10)
        await commit_tx.rollback()

    assert skipped == []
    claimed = await repo.claim_unreferenced_blobs(older_than=LATER, now=LATER, limit=10)
    assert [b.id for b in claimed] == [blob_id]


@postgresql_only
async def test_commit_waiting_on_a_claim_writes_a_new_generation(repo: MetadataRepository) -> None:
    blob_id = await orphan_blob(repo, b"contended")

    async with repo.engine.connect() as gc_tx:
        await gc_tx.execute(sa.select(blobs.c.id).where(blobs.c.id == blob_id).with_for_update())
        commit = asyncio.create_task(
            repo.commit_artifact(blob=blob_info(b"contended"), artifact=new_artifact())
        )
        await _wait_until_blocked(repo)
        await gc_tx.execute(sa.update(blobs).where(blobs.c.id == blob_id).values(state="tombstoned"))
        await gc_tx.commit()
        result = await commit

    assert result.deduplicated is False
    assert result.blob.id != blob_id


async def _wait_until_blocked(repo: MetadataRepository) -> None:
    """Return once some session of this database waits for a lock."""
    query = sa.text(
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE wait_event_type = 'Lock' AND datname = current_database()"
    )
    async with repo.engine.connect() as probe:

        async def blocked() -> bool:
            waiting = bool(await probe.scalar(query))
            await probe.rollback()  # a fresh snapshot of pg_stat_activity for the next look
            return waiting

        await wait_until_async(
            blocked, within=LOCK_WAIT_SECONDS, what="a session to wait for a lock", interval=0.01
        )

"""Artifact commit, dedup, namespace scoping, expiry and keyset pagination, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
import uuid
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
import sqlalchemy as sa

from blobstore.errors import ContentNotLive
from blobstore.metadata.repository import MetadataRepository
from blobstore.metadata.repository.sqlite_reads import SqliteLookups
from blobstore.metadata.tables import artifacts
from blobstore.models import UNSET
from blobstore.nowait import WouldBlock
from tests.fixtures.pg import opened_repository
from tests.metadata.helpers import T0, blob_info, new_artifact


async def test_commit_of_new_content_inserts_a_live_blob_and_the_artifact(repo: MetadataRepository) -> None:
    info = blob_info(b"first content")
    result = await repo.commit_artifact(blob=info, artifact=new_artifact(expires_at=T0 + timedelta(days=1)))

    assert result.deduplicated is False
    assert result.blob.info == info
    assert result.blob.state == "live"
    assert result.artifact.blob_id == result.blob.id
    assert (result.artifact.size, result.artifact.sha256) == (info.size, info.sha256)
    assert await repo.get_artifact("ns", result.artifact.id, now=T0) == result.artifact
    stored = await repo.get_blob(result.blob.id)
    assert stored == result.blob


async def test_second_commit_of_same_content_dedups_onto_the_same_blob(repo: MetadataRepository) -> None:
    first = await repo.commit_artifact(blob=blob_info(b"same bytes"), artifact=new_artifact())
    second_info = blob_info(b"same bytes")
    second = await repo.commit_artifact(blob=second_info, artifact=new_artifact(namespace="other"))

    assert second.deduplicated is True
    assert second.blob.id == first.blob.id
    assert second.blob.info.key == first.blob.info.key != second_info.key
    assert second.artifact.blob_id == first.blob.id
    assert await repo.known_storage_keys([first.blob.info.key, second_info.key]) == {first.blob.info.key}


async def test_concurrent_commits_of_new_content_share_one_blob(repo: MetadataRepository) -> None:
    results = await asyncio.gather(
        *(repo.commit_artifact(blob=blob_info(b"racing content"), artifact=new_artifact()) for _ in range(6))
    )

    assert len({result.blob.id for result in results}) == 1
    assert sum(not result.deduplicated for result in results) == 1
    assert (await repo.stats(now=T0))["blobs"] == 1


async def test_dedup_clears_the_blobs_unreferenced_mark(repo: MetadataRepository) -> None:
    first = await repo.commit_artifact(blob=blob_info(b"orphaned"), artifact=new_artifact())
    await repo.delete_artifact("ns", first.artifact.id)
    assert await repo.mark_unreferenced_blobs(now=T0) == 1

    await repo.commit_artifact(blob=blob_info(b"orphaned"), artifact=new_artifact())

    claimed = await repo.claim_unreferenced_blobs(
        older_than=T0 + timedelta(days=30), now=T0 + timedelta(days=30), limit=10
    )
    assert claimed == []


async def test_other_namespace_sees_nothing(repo: MetadataRepository) -> None:
    result = await repo.commit_artifact(blob=blob_info(b"tenant a"), artifact=new_artifact("tenant-a"))
    artifact_id = result.artifact.id

    assert await repo.get_artifact("tenant-b", artifact_id, now=T0) is None
    assert await repo.get_artifact_with_blob("tenant-b", artifact_id, now=T0) is None
    assert await repo.list_artifacts("tenant-b", now=T0, limit=10, after=None) == []
    assert await repo.update_artifact("tenant-b", artifact_id, pinned=True, now=T0) is None
    assert await repo.delete_artifact("tenant-b", artifact_id) is None
    assert await repo.namespace_usage("tenant-b", now=T0) == 0
    assert await repo.get_artifact("tenant-a", artifact_id, now=T0) is not None


async def test_missing_artifact_is_none(repo: MetadataRepository) -> None:
    assert await repo.get_artifact("ns", "does-not-exist", now=T0) is None
    assert await repo.get_artifact_with_blob("ns", "does-not-exist", now=T0) is None


async def test_expired_artifact_is_hidden_unless_pinned(repo: MetadataRepository) -> None:
    expires = T0 + timedelta(hours=1)
    plain = await repo.commit_artifact(blob=blob_info(b"a"), artifact=new_artifact(expires_at=expires))
    pinned = await repo.commit_artifact(
        blob=blob_info(b"b"), artifact=new_artifact(expires_at=expires, pinned=True)
    )
    before, at_expiry = expires - timedelta(microseconds=1), expires

    assert await repo.get_artifact("ns", plain.artifact.id, now=before) is not None
    assert await repo.get_artifact("ns", plain.artifact.id, now=at_expiry) is None
    assert await repo.get_artifact_with_blob("ns", plain.artifact.id, now=at_expiry) is None
    assert await repo.get_artifact("ns", pinned.artifact.id, now=at_expiry) is not None
    listed = await repo.list_artifacts("ns", now=at_expiry, limit=10, after=None)
    assert [artifact.id for artifact in listed] == [pinned.artifact.id]
    assert await repo.namespace_usage("ns", now=before) == 2
    assert await repo.namespace_usage("ns", now=at_expiry) == 1
    assert await repo.update_artifact("ns", plain.artifact.id, pinned=True, now=at_expiry) is None


async def test_get_artifact_with_blob_joins_the_blob_row(repo: MetadataRepository) -> None:
    info = blob_info(b"0123456789")
    result = await repo.commit_artifact(blob=info, artifact=new_artifact())

    found = await repo.get_artifact_with_blob("ns", result.artifact.id, now=T0)

    assert found is not None
    artifact, blob = found
    assert artifact == result.artifact
    assert blob.id == result.blob.id
    assert blob.info == info


async def test_empty_blob_round_trips_with_no_chunk_checksums(repo: MetadataRepository) -> None:
    info = blob_info(b"")
    assert info.block_xxh3 == ()
    result = await repo.commit_artifact(blob=info, artifact=new_artifact())

    stored = await repo.get_blob(result.blob.id)
    assert stored is not None
    assert stored.info == info


async def test_update_artifact_changes_only_given_fields(repo: MetadataRepository) -> None:
    result = await repo.commit_artifact(blob=blob_info(b"x"), artifact=new_artifact(expires_at=T0))
    artifact_id = result.artifact.id
    later = T0 + timedelta(days=2)

    pinned = await repo.update_artifact("ns", artifact_id, pinned=True, now=T0 - timedelta(seconds=1))
    assert pinned is not None
    assert pinned.pinned is True
    assert pinned.expires_at == T0

    extended = await repo.update_artifact("ns", artifact_id, expires_at=later, now=T0)
    assert extended is not None
    assert extended.expires_at == later
    assert extended.pinned is True

    forever = await repo.update_artifact("ns", artifact_id, expires_at=None, pinned=False, now=T0)
    assert forever is not None
    assert forever.expires_at is None
    assert forever.pinned is False

    unchanged = await repo.update_artifact("ns", artifact_id, expires_at=UNSET, now=T0)
    assert unchanged == forever


async def test_delete_artifact_returns_the_row_and_keeps_the_blob(repo: MetadataRepository) -> None:
    result = await repo.commit_artifact(blob=blob_info(b"to delete"), artifact=new_artifact())

    deleted = await repo.delete_artifact("ns", result.artifact.id)

    assert deleted == result.artifact
    assert await repo.get_artifact("ns", result.artifact.id, now=T0) is None
    assert await repo.delete_artifact("ns", result.artifact.id) is None
    assert await repo.get_blob(result.blob.id) == result.blob


async def insert_artifact_rows(repo: MetadataRepository, blob_id: int, created: list[datetime]) -> list[str]:
    """Bulk rows over one blob in one transaction: commit_artifact per row would make this test slow."""
    rows = [
        {
            "id": uuid.uuid4().hex,
            "namespace": "ns",
            "name": "n",
            "mime_type": "text/plain",
            "size": 1,
            "sha256": "0" * 64,
            "blob_id": blob_id,
            "created_at": created_at,
            "user_metadata": {},
            "media": {},
        }
        for created_at in created
    ]
    async with repo.engine.begin() as conn:
        await conn.execute(sa.insert(artifacts), rows)
    return [str(row["id"]) for row in rows]


async def test_keyset_pages_return_each_artifact_once_despite_inserts(repo: MetadataRepository) -> None:
    first = await repo.commit_artifact(blob=blob_info(b"page content"), artifact=new_artifact())
    # Three artifacts per timestamp, so the id tie-breaker matters.
    original = [first.artifact.id]
    original += await insert_artifact_rows(
        repo, first.blob.id, [T0 + timedelta(milliseconds=i // 3) for i in range(1, 300)]
    )
    await repo.commit_artifact(blob=blob_info(b"elsewhere"), artifact=new_artifact("other-ns"))

    seen: list[tuple[datetime, str]] = []
    after = None
    pages = 0
    while True:
        page = await repo.list_artifacts("ns", now=T0, limit=7, after=after)
        if not page:
            break
        pages += 1
        seen.extend((artifact.created_at, artifact.id) for artifact in page)
        after = (page[-1].created_at, page[-1].id)
        # New rows before, at and after the cursor: none may duplicate or hide an original.
        await insert_artifact_rows(
            repo, first.blob.id, [T0 - timedelta(seconds=1), page[-1].created_at, T0 + timedelta(hours=1)]
        )

    seen_ids = [artifact_id for _, artifact_id in seen]
    assert len(seen_ids) == len(set(seen_ids))
    assert set(original) <= set(seen_ids)
    assert seen == sorted(seen, reverse=True)  # newest first, ties by id, across every page
    assert pages > 40


async def test_namespace_usage_sums_visible_artifact_sizes(repo: MetadataRepository) -> None:
    await repo.commit_artifact(blob=blob_info(b"12345"), artifact=new_artifact())
    await repo.commit_artifact(blob=blob_info(b"12345"), artifact=new_artifact())
    await repo.commit_artifact(blob=blob_info(b"123"), artifact=new_artifact())
    await repo.commit_artifact(blob=blob_info(b"1234567"), artifact=new_artifact("other"))

    assert await repo.namespace_usage("ns", now=T0) == 13
    assert await repo.namespace_usage("empty", now=T0) == 0


async def test_stats_count_artifacts_blobs_and_bytes(repo: MetadataRepository) -> None:
    await repo.commit_artifact(blob=blob_info(b"12345"), artifact=new_artifact())
    await repo.commit_artifact(blob=blob_info(b"12345"), artifact=new_artifact("other"))
    await repo.commit_artifact(blob=blob_info(b"123"), artifact=new_artifact(expires_at=T0))

    stats = await repo.stats(now=T0)

    assert stats == {
        "artifacts": 2,
        "blobs": 2,
        "bytes_stored": 8,
        "bytes_logical": 10,
        "open_uploads": 0,
        "renditions": 0,
        "rendition_bytes": 0,
    }


async def test_find_artifacts_with_content_lists_visible_ones_of_the_namespace_newest_first(
    repo: MetadataRepository,
) -> None:
    older = await repo.commit_artifact(
        blob=blob_info(b"shared bytes"), artifact=new_artifact(expires_at=T0 + timedelta(days=1))
    )
    newer = await repo.commit_artifact(
        blob=blob_info(b"shared bytes"),
        artifact=new_artifact(created_at=T0 + timedelta(seconds=1), expires_at=T0 + timedelta(days=1)),
    )
    await repo.commit_artifact(blob=blob_info(b"shared bytes"), artifact=new_artifact(namespace="other"))
    await repo.commit_artifact(
        blob=blob_info(b"shared bytes"), artifact=new_artifact(expires_at=T0 - timedelta(seconds=1))
    )
    await repo.commit_artifact(blob=blob_info(b"other bytes"), artifact=new_artifact())
    sha = blob_info(b"shared bytes").sha256

    found = await repo.find_artifacts_with_content("ns", sha, now=T0)

    assert [a.id for a in found] == [newer.artifact.id, older.artifact.id]
    assert await repo.find_artifacts_with_content("ns", "0" * 64, now=T0) == []


@pytest.mark.parametrize(
    ("metadata", "media"),
    [
        ({"ключ": "значение", "n": "1"}, {"width": 3, "height": 4, "nested": {"a": [1, 2]}}),
        ({}, {}),  # the common case, answered without the JSON parser
    ],
)
async def test_content_lookup_reads_every_field_back_as_committed(
    repo: MetadataRepository, metadata: dict[str, str], media: dict[str, object]
) -> None:
    # On SQLite the content lookup is a hand-written statement whose row is converted by hand: every column
    # must come back as the SQLAlchemy read of the same row gives it.
    expires = T0 + timedelta(days=2, microseconds=123_456)
    new = dataclasses.replace(
        new_artifact(expires_at=expires, pinned=True), name="résumé ✓.txt", metadata=metadata, media=media
    )
    result = await repo.commit_artifact(blob=blob_info(b"0123456789"), artifact=new)
    later = datetime(2030, 1, 5, 3, 0, tzinfo=timezone(timedelta(hours=5)))

    found = await repo.get_artifact_with_blob("ns", result.artifact.id, now=later)

    assert found is not None
    artifact, blob = found
    assert artifact == await repo.get_artifact("ns", result.artifact.id, now=later)
    assert artifact == result.artifact
    assert artifact.expires_at == expires
    assert artifact.expires_at.tzinfo == UTC
    assert artifact.created_at == T0
    assert artifact.created_at.tzinfo == UTC
    assert blob == result.blob
    if repo.blocking_reads:
        assert repo.get_artifact_with_blob_blocking("ns", result.artifact.id, now=later) == found
        assert repo.get_artifact_with_blob_nowait("ns", result.artifact.id, now=later) == found


# The event loop's lookups are SQLite's; PostgreSQL's go through the async driver.
@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_a_lookup_that_must_not_wait_refuses_a_locked_database_at_once(database_url: str) -> None:
    path = Path(database_url.removeprefix("sqlite+aiosqlite:///"))
    async with opened_repository(database_url) as repo:
        result = await repo.commit_artifact(blob=blob_info(b"locked out"), artifact=new_artifact())
    artifact_id = result.artifact.id
    # A connection in exclusive locking mode keeps its lock after its write: WAL readers would have to wait.
    holder = sqlite3.connect(path, isolation_level=None)
    lookups = SqliteLookups(path)
    try:
        holder.execute("PRAGMA locking_mode=EXCLUSIVE")
        holder.execute("BEGIN IMMEDIATE")
        holder.execute("UPDATE artifacts SET name = name")
        holder.execute("COMMIT")
        with pytest.raises(WouldBlock):
            lookups.artifact_with_blob("ns", artifact_id, T0, wait=False)
        holder.close()
        found = lookups.artifact_with_blob("ns", artifact_id, T0, wait=False)
        assert found is not None
        assert found[0] == result.artifact
    finally:
        holder.close()
        lookups.close()


async def test_content_lookup_compares_expiry_in_utc_whatever_the_zone_of_now(
    repo: MetadataRepository,
) -> None:
    expires = T0 + timedelta(hours=1)
    plain = await repo.commit_artifact(blob=blob_info(b"a"), artifact=new_artifact(expires_at=expires))
    zone = timezone(timedelta(hours=-7))

    before = (expires - timedelta(microseconds=1)).astimezone(zone)
    assert await repo.get_artifact_with_blob("ns", plain.artifact.id, now=before) is not None
    assert await repo.get_artifact_with_blob("ns", plain.artifact.id, now=expires.astimezone(zone)) is None


async def test_a_dedup_only_commit_without_a_live_blob_commits_nothing(repo: MetadataRepository) -> None:
    with pytest.raises(ContentNotLive):
        await repo.commit_artifact(blob=blob_info(b"never kept"), artifact=new_artifact(), dedup_only=True)
    assert (await repo.stats(now=T0))["blobs"] == 0

    first = await repo.commit_artifact(blob=blob_info(b"kept"), artifact=new_artifact())
    second = await repo.commit_artifact(blob=blob_info(b"kept"), artifact=new_artifact(), dedup_only=True)
    assert second.deduplicated is True
    assert second.blob.id == first.blob.id

"""Renditions (cached media views) in the repository, on every backend: found by key, deduplicated onto live
blobs, kept alive as long as their sources, counted as references by the blob sweep, removed with their
sources."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timedelta

import sqlalchemy as sa

from blobstore.metadata.repository import MetadataRepository
from blobstore.metadata.tables import blobs, renditions
from blobstore.models import NewRendition
from tests.metadata.helpers import T0, blob_info, new_artifact

LATER = T0 + timedelta(days=3)
SOURCE = "5" * 64


def new_rendition(
    *, key: str | None = None, source: str = SOURCE, expires_at: datetime | None = LATER
) -> NewRendition:
    return NewRendition(
        key=key or uuid.uuid4().hex * 2,
        source_sha256=source,
        mime_type="text/plain",
        meta={"page": 7},
        created_at=T0,
        expires_at=expires_at,
    )


async def blob_count(repo: MetadataRepository) -> int:
    async with repo.engine.connect() as conn:
        return int(await conn.scalar(sa.select(sa.func.count()).select_from(blobs)) or 0)


async def test_a_committed_rendition_is_found_by_its_key_with_its_blob(repo: MetadataRepository) -> None:
    content = blob_info(b"page seven")
    made = new_rendition()

    stored = await repo.commit_rendition(blob=content, rendition=made, now=T0)
    found = await repo.get_rendition(made.key, now=T0)

    assert stored == found
    assert found is not None
    assert (found.key, found.source_sha256, found.mime_type, found.meta) == (
        made.key,
        SOURCE,
        "text/plain",
        {"page": 7},
    )
    assert (found.size, found.blob.info.key, found.blob.info.sha256) == (10, content.key, content.sha256)
    assert found.expires_at == LATER
    assert await repo.get_rendition("0" * 64, now=T0) is None


async def test_a_rendition_past_its_expiry_is_not_found_and_one_without_expiry_lives_on(
    repo: MetadataRepository,
) -> None:
    brief = new_rendition(expires_at=T0 + timedelta(hours=1))
    lasting = new_rendition(expires_at=None)
    await repo.commit_rendition(blob=blob_info(b"a"), rendition=brief, now=T0)
    await repo.commit_rendition(blob=blob_info(b"b"), rendition=lasting, now=T0)

    much_later = T0 + timedelta(days=3650)
    assert await repo.get_rendition(brief.key, now=T0 + timedelta(hours=1)) is None
    assert await repo.get_rendition(lasting.key, now=much_later) is not None


async def test_identical_bytes_share_one_blob_with_renditions_and_artifacts(repo: MetadataRepository) -> None:
    artifact = await repo.commit_artifact(blob=blob_info(b"same bytes"), artifact=new_artifact())
    first = await repo.commit_rendition(blob=blob_info(b"same bytes"), rendition=new_rendition(), now=T0)
    second = await repo.commit_rendition(blob=blob_info(b"same bytes"), rendition=new_rendition(), now=T0)

    assert first.key != second.key
    assert first.blob.id == second.blob.id == artifact.blob.id
    assert first.blob.info.key == artifact.blob.info.key
    assert await blob_count(repo) == 1


async def test_a_second_commit_of_a_live_key_keeps_the_first_and_extends_its_life(
    repo: MetadataRepository,
) -> None:
    key = "k" * 64
    first = await repo.commit_rendition(blob=blob_info(b"one"), rendition=new_rendition(key=key), now=T0)
    again = await repo.commit_rendition(
        blob=blob_info(b"two"), rendition=new_rendition(key=key, expires_at=None), now=T0
    )

    assert again.blob.id == first.blob.id
    assert again.blob.info.key == first.blob.info.key  # the caller deletes its own generation
    assert again.expires_at is None
    assert await blob_count(repo) == 1


async def test_a_commit_replaces_an_expired_row_of_its_key(repo: MetadataRepository) -> None:
    key = "e" * 64
    await repo.commit_rendition(
        blob=blob_info(b"old"), rendition=new_rendition(key=key, expires_at=T0 + timedelta(hours=1)), now=T0
    )
    renewed = await repo.commit_rendition(
        blob=blob_info(b"new"), rendition=new_rendition(key=key), now=T0 + timedelta(hours=2)
    )

    assert renewed.size == 3
    assert renewed.blob.info.sha256 == blob_info(b"new").sha256
    assert renewed.expires_at == LATER


async def test_extend_only_ever_lengthens_a_renditions_life(repo: MetadataRepository) -> None:
    made = new_rendition(expires_at=LATER)
    await repo.commit_rendition(blob=blob_info(b"x"), rendition=made, now=T0)

    await repo.extend_rendition(made.key, T0 + timedelta(days=1))
    shorter = await repo.get_rendition(made.key, now=T0)
    await repo.extend_rendition(made.key, LATER + timedelta(days=1))
    longer = await repo.get_rendition(made.key, now=T0)
    await repo.extend_rendition(made.key, None)
    forever = await repo.get_rendition(made.key, now=T0)
    await repo.extend_rendition(made.key, LATER)
    still = await repo.get_rendition(made.key, now=T0)

    assert [r.expires_at if r else "missing" for r in (shorter, longer, forever, still)] == [
        LATER,
        LATER + timedelta(days=1),
        None,
        None,
    ]


async def test_the_blob_sweep_keeps_a_blob_only_a_rendition_references(repo: MetadataRepository) -> None:
    made = await repo.commit_rendition(blob=blob_info(b"view bytes"), rendition=new_rendition(), now=T0)

    assert await repo.mark_unreferenced_blobs(now=T0) == 0
    assert await repo.claim_unreferenced_blobs(older_than=LATER, now=LATER, limit=10) == []
    assert await repo.get_blob(made.blob.id) is not None
    due = await repo.cleanup_due(now=LATER, older_than=LATER)
    assert (due["unreferenced_blobs"], due["blobs_due"]) == (0, 0)


async def test_renditions_go_once_expired_or_once_no_live_artifact_holds_their_source(
    repo: MetadataRepository,
) -> None:
    source = await repo.commit_artifact(blob=blob_info(b"the pdf"), artifact=new_artifact(expires_at=LATER))
    pinned = await repo.commit_artifact(blob=blob_info(b"pinned pdf"), artifact=new_artifact(pinned=True))
    of_live = new_rendition(source=source.artifact.sha256)
    of_pinned = new_rendition(source=pinned.artifact.sha256, expires_at=None)
    expired = new_rendition(source=source.artifact.sha256, expires_at=T0)
    sourceless = new_rendition(source="f" * 64, expires_at=None)
    for made, content in [(of_live, b"1"), (of_pinned, b"2"), (expired, b"3"), (sourceless, b"4")]:
        await repo.commit_rendition(blob=blob_info(content), rendition=made, now=T0 - timedelta(hours=1))

    assert await repo.renditions_due(now=T0) == (2, 2)
    first = await repo.remove_renditions(now=T0, limit=1)
    second = await repo.remove_renditions(now=T0, limit=1)
    assert await repo.remove_renditions(now=T0, limit=1) == []
    assert {r.key for r in first + second} == {expired.key, sourceless.key}
    assert await repo.get_rendition(of_live.key, now=T0) is not None
    assert await repo.get_rendition(of_pinned.key, now=T0) is not None
    # Their blobs are unreferenced now, and the sweep takes them; the others' are kept.
    assert await repo.mark_unreferenced_blobs(now=T0) == 2

    # The pinned source deleted, and the other expired: their renditions go too, whatever their expiry.
    await repo.delete_artifact("ns", pinned.artifact.id)
    gone = await repo.remove_renditions(now=LATER, limit=10)
    assert {r.key for r in gone} == {of_live.key, of_pinned.key}
    assert await repo.renditions_due(now=LATER) == (0, 0)


async def test_concurrent_commits_of_one_key_leave_one_rendition_and_one_blob(
    repo: MetadataRepository,
) -> None:
    key = "c" * 64
    results = await asyncio.gather(
        *(
            repo.commit_rendition(blob=blob_info(b"made twice"), rendition=new_rendition(key=key), now=T0)
            for _ in range(4)
        )
    )

    assert len({r.blob.info.key for r in results}) == 1
    assert await blob_count(repo) == 1
    async with repo.engine.connect() as conn:
        assert await conn.scalar(sa.select(sa.func.count()).select_from(renditions)) == 1


async def test_trimming_deletes_the_oldest_renditions_until_the_rest_fit(repo: MetadataRepository) -> None:
    made = []
    for age, content in enumerate([b"aaaa", b"bbbb", b"cccc", b"dddd"]):
        rendition = NewRendition(
            key=f"{age}" * 64,
            source_sha256=SOURCE,
            mime_type="text/plain",
            meta={},
            created_at=T0 + timedelta(minutes=age),
            expires_at=None,
        )
        await repo.commit_rendition(blob=blob_info(content), rendition=rendition, now=T0)
        made.append(rendition.key)

    assert await repo.trim_renditions(max_bytes=16, limit=10) == []
    first = await repo.trim_renditions(max_bytes=8, limit=1)
    second = await repo.trim_renditions(max_bytes=8, limit=1)
    third = await repo.trim_renditions(max_bytes=8, limit=1)

    assert [r.key for r in first + second] == made[:2]
    assert third == []
    assert [await repo.get_rendition(key, now=T0) is not None for key in made] == [False, False, True, True]

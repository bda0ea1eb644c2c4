"""Attaching a reference to the live blob of its content: a dedup clears the blob's GC mark, and on SQLite
the mark is cleared only when there is one (a commit of new content runs no UPDATE of ``blobs``)."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from blobstore.metadata.repository import MetadataRepository
from blobstore.metadata.tables import blobs
from tests.metadata.helpers import T0, blob_info, new_artifact

SQLITE_ONLY = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


async def marked_orphan(repo: MetadataRepository, content: bytes) -> int:
    """The blob of a committed and deleted artifact, marked unreferenced at T0."""
    result = await repo.commit_artifact(blob=blob_info(content), artifact=new_artifact())
    await repo.delete_artifact("ns", result.artifact.id)
    await repo.mark_unreferenced_blobs(now=T0)
    return result.blob.id


async def gc_mark(repo: MetadataRepository, blob_id: int) -> Any:
    async with repo.engine.connect() as conn:
        return await conn.scalar(sa.select(blobs.c.unreferenced_since).where(blobs.c.id == blob_id))


def blob_updates(repo: MetadataRepository) -> list[str]:
    """The UPDATEs of ``blobs`` the repository's group commits run from now on."""
    writer = repo._sync_writer
    assert writer is not None
    seen: list[str] = []

    def on_execute(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.lstrip().upper().startswith("UPDATE BLOBS"):
            seen.append(statement)

    sa.event.listen(writer, "before_cursor_execute", on_execute)
    return seen


async def test_a_dedup_onto_a_marked_blob_clears_its_mark(repo: MetadataRepository) -> None:
    blob_id = await marked_orphan(repo, b"revived")
    assert await gc_mark(repo, blob_id) is not None

    result = await repo.commit_artifact(blob=blob_info(b"revived"), artifact=new_artifact())

    assert result.deduplicated
    assert result.blob.id == blob_id
    assert await gc_mark(repo, blob_id) is None


@SQLITE_ONLY
async def test_new_content_on_sqlite_updates_no_blob_row(repo: MetadataRepository) -> None:
    updates = blob_updates(repo)

    result = await repo.commit_artifact(blob=blob_info(b"new content"), artifact=new_artifact())
    await repo.commit_artifact(blob=blob_info(b"new content"), artifact=new_artifact())

    assert not result.deduplicated
    # Neither the new blob nor the unmarked one deduplicated onto needs its mark cleared.
    assert updates == []


@SQLITE_ONLY
async def test_a_dedup_onto_a_marked_blob_on_sqlite_clears_the_mark_once(repo: MetadataRepository) -> None:
    blob_id = await marked_orphan(repo, b"marked")
    updates = blob_updates(repo)

    await repo.commit_artifact(blob=blob_info(b"marked"), artifact=new_artifact())

    assert len(updates) == 1
    assert await gc_mark(repo, blob_id) is None

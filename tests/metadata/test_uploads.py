"""Upload sessions and chunk rows, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from blobstore.errors import NotFound
from blobstore.metadata.repository import MetadataRepository
from blobstore.models import ChunkRecord, UploadState
from tests.metadata.helpers import T0, upload_session


def chunk(upload_id: str, index: int, *, sha256: str = "a" * 64, minutes: int = 1) -> ChunkRecord:
    return ChunkRecord(
        upload_id=upload_id,
        index=index,
        size=10,
        sha256=sha256,
        xxh3="b" * 32,
        received_at=T0 + timedelta(minutes=minutes),
    )


async def test_created_upload_reads_back_only_in_its_namespace(repo: MetadataRepository) -> None:
    session = upload_session("ns")
    await repo.create_upload(session)

    assert await repo.get_upload("ns", session.id) == session
    assert await repo.get_upload("other", session.id) is None
    assert await repo.get_upload("ns", "missing") is None


async def test_record_chunk_inserts_once_and_returns_the_stored_row(repo: MetadataRepository) -> None:
    session = upload_session()
    await repo.create_upload(session)
    first = chunk(session.id, 0, sha256="1" * 64, minutes=1)

    assert await repo.record_chunk(first) == first
    # A second writer of the same index gets the row already stored, not its own.
    again = await repo.record_chunk(chunk(session.id, 0, sha256="2" * 64, minutes=5))

    assert again == first
    assert await repo.list_chunks(session.id) == [first]
    upload = await repo.get_upload("ns", session.id)
    assert upload is not None
    assert upload.updated_at == T0 + timedelta(minutes=5)


async def test_concurrent_records_of_one_index_agree_on_one_row(repo: MetadataRepository) -> None:
    session = upload_session()
    await repo.create_upload(session)

    stored = await asyncio.gather(
        *(repo.record_chunk(chunk(session.id, 3, sha256=f"{i}" * 64)) for i in range(5))
    )

    assert len(set(stored)) == 1
    assert await repo.list_chunks(session.id) == [stored[0]]


async def test_concurrent_records_of_many_chunks_each_get_their_own_outcome(repo: MetadataRepository) -> None:
    # On SQLite these share transactions: the unknown upload's failure must not take the others with it.
    session = upload_session()
    await repo.create_upload(session)

    outcomes = await asyncio.gather(
        *(repo.record_chunk(chunk(session.id, index, sha256=f"{index % 10}" * 64)) for index in range(12)),
        repo.record_chunk(chunk("no-such-upload", 0)),
        return_exceptions=True,
    )

    assert isinstance(outcomes[-1], NotFound)
    assert outcomes[:-1] == [chunk(session.id, index, sha256=f"{index % 10}" * 64) for index in range(12)]
    assert await repo.list_chunks(session.id) == outcomes[:-1]


async def test_record_chunk_of_unknown_upload_is_not_found(repo: MetadataRepository) -> None:
    with pytest.raises(NotFound):
        await repo.record_chunk(chunk("no-such-upload", 0))


async def test_chunks_list_in_index_order(repo: MetadataRepository) -> None:
    session = upload_session()
    await repo.create_upload(session)
    for index in (4, 0, 2, 1):
        await repo.record_chunk(chunk(session.id, index))

    assert [c.index for c in await repo.list_chunks(session.id)] == [0, 1, 2, 4]


async def test_transition_is_compare_and_set(repo: MetadataRepository) -> None:
    session = upload_session()
    await repo.create_upload(session)
    later = T0 + timedelta(minutes=3)

    assert await repo.transition_upload(
        session.id, from_states=[UploadState.OPEN], to_state=UploadState.COMPLETING, now=later
    )
    assert not await repo.transition_upload(
        session.id, from_states=[UploadState.OPEN], to_state=UploadState.ABORTED, now=later
    )
    assert await repo.transition_upload(
        session.id,
        from_states=[UploadState.COMPLETING],
        to_state=UploadState.COMPLETED,
        artifact_id="art-1",
        now=later,
    )
    upload = await repo.get_upload("ns", session.id)
    assert upload is not None
    assert (upload.state, upload.artifact_id, upload.updated_at) == (UploadState.COMPLETED, "art-1", later)
    assert not await repo.transition_upload(
        "missing", from_states=[UploadState.OPEN], to_state=UploadState.ABORTED, now=later
    )


async def test_exactly_one_of_concurrent_transitions_wins(repo: MetadataRepository) -> None:
    session = upload_session()
    await repo.create_upload(session)

    outcomes = await asyncio.gather(
        *(
            repo.transition_upload(
                session.id, from_states=[UploadState.OPEN], to_state=target, now=T0 + timedelta(minutes=1)
            )
            for target in [UploadState.COMPLETING, UploadState.ABORTED] * 4
        )
    )

    assert outcomes.count(True) == 1
    upload = await repo.get_upload("ns", session.id)
    assert upload is not None
    winner = [UploadState.COMPLETING, UploadState.ABORTED][outcomes.index(True) % 2]
    assert upload.state == winner


async def test_open_upload_count_includes_completing_only(repo: MetadataRepository) -> None:
    states = [UploadState.OPEN, UploadState.COMPLETING, UploadState.COMPLETED, UploadState.ABORTED]
    for state in states:
        await repo.create_upload(upload_session(state=state))
    await repo.create_upload(upload_session("other"))

    assert await repo.count_open_uploads("ns") == 2
    assert (await repo.stats(now=T0))["open_uploads"] == 3


async def test_expired_uploads_are_listed_oldest_first(
    repo: MetadataRepository,
) -> None:
    old = upload_session(expires_at=T0 - timedelta(hours=2))
    older = upload_session(expires_at=T0 - timedelta(hours=3))
    fresh = upload_session(expires_at=T0 + timedelta(hours=1))
    done = upload_session(state=UploadState.COMPLETED, expires_at=T0 - timedelta(hours=5))
    for session in (old, older, fresh, done):
        await repo.create_upload(session)

    expired = await repo.list_expired_uploads(now=T0, limit=10)
    assert [s.id for s in expired] == [older.id, old.id]
    assert [s.id for s in await repo.list_expired_uploads(now=T0, limit=1)] == [older.id]


async def test_delete_upload_removes_its_chunks(repo: MetadataRepository) -> None:
    session = upload_session()
    await repo.create_upload(session)
    await repo.record_chunk(chunk(session.id, 0))

    assert await repo.delete_upload(session.id)

    assert await repo.get_upload("ns", session.id) is None
    assert await repo.list_chunks(session.id) == []
    assert not await repo.delete_upload(session.id)

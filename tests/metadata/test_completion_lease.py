"""Completion leases and the atomic quota / open-uploads checks, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from blobstore.errors import CompletionLost, QuotaExceeded, TooManyUploads
from blobstore.metadata.repository import MetadataRepository
from blobstore.models import CompletionClaim, UploadState
from tests.metadata.helpers import T0, blob_info, new_artifact, upload_session

LEASE = timedelta(seconds=20)


async def _completing(repo: MetadataRepository, owner: str = "P:a:1") -> str:
    session = upload_session()
    await repo.create_upload(session)
    assert await repo.begin_completion(session.id, owner=owner, lease_until=T0 + LEASE, now=T0)
    return session.id


async def test_begin_completion_records_owner_and_lease_and_is_compare_and_set(
    repo: MetadataRepository,
) -> None:
    upload_id = await _completing(repo, "P:a:1")

    assert not await repo.begin_completion(upload_id, owner="P:b:2", lease_until=T0 + LEASE, now=T0)
    upload = await repo.get_upload("ns", upload_id)
    assert upload is not None
    assert (upload.state, upload.completion_owner) == (UploadState.COMPLETING, "P:a:1")
    assert upload.completion_lease_until == T0 + LEASE


async def test_an_expired_lease_is_taken_back_to_open_but_a_live_one_is_not(
    repo: MetadataRepository,
) -> None:
    upload_id = await _completing(repo, "P:a:1")

    # Before the lease runs out nobody else may release it, whatever the owner.
    before = T0 + LEASE - timedelta(seconds=1)
    assert not await repo.release_completion(upload_id, owner="P:a:1", now=before, expired_only=True)
    # After it ran out, the release must name the owner that was seen.
    after = T0 + LEASE + timedelta(seconds=1)
    assert not await repo.release_completion(upload_id, owner="P:other:9", now=after, expired_only=True)
    assert await repo.release_completion(upload_id, owner="P:a:1", now=after, expired_only=True)

    upload = await repo.get_upload("ns", upload_id)
    assert upload is not None
    assert (upload.state, upload.completion_owner, upload.completion_lease_until) == (
        UploadState.OPEN,
        None,
        None,
    )
    # Open again: a new completer can take it.
    assert await repo.begin_completion(upload_id, owner="P:b:2", lease_until=after + LEASE, now=after)


async def test_a_renewed_lease_is_not_taken_over(repo: MetadataRepository) -> None:
    upload_id = await _completing(repo, "P:a:1")
    assert await repo.renew_completion(upload_id, owner="P:a:1", lease_until=T0 + 2 * LEASE)

    # Seen as expired by the old expiry, but the statement that writes checks the renewed one.
    assert not await repo.release_completion(
        upload_id, owner="P:a:1", now=T0 + LEASE + timedelta(seconds=1), expired_only=True
    )
    assert not await repo.renew_completion(upload_id, owner="P:b:2", lease_until=T0 + 3 * LEASE)
    upload = await repo.get_upload("ns", upload_id)
    assert upload is not None
    assert (upload.state, upload.completion_lease_until) == (UploadState.COMPLETING, T0 + 2 * LEASE)


async def test_commit_completes_the_upload_only_for_the_lease_owner(repo: MetadataRepository) -> None:
    upload_id = await _completing(repo, "P:a:1")
    after = T0 + LEASE + timedelta(seconds=1)
    assert await repo.release_completion(upload_id, owner="P:a:1", now=after, expired_only=True)
    assert await repo.begin_completion(upload_id, owner="P:b:2", lease_until=after + LEASE, now=after)

    # The first completer lost its lease: its commit adds nothing.
    lost = new_artifact()
    with pytest.raises(CompletionLost):
        await repo.commit_artifact(
            blob=blob_info(b"content"), artifact=lost, completion=CompletionClaim(upload_id, "P:a:1")
        )
    assert await repo.get_artifact("ns", lost.id, now=T0) is None

    won = new_artifact()
    await repo.commit_artifact(
        blob=blob_info(b"content"), artifact=won, completion=CompletionClaim(upload_id, "P:b:2")
    )
    upload = await repo.get_upload("ns", upload_id)
    assert upload is not None
    assert (upload.state, upload.artifact_id, upload.completion_owner) == (
        UploadState.COMPLETED,
        won.id,
        None,
    )
    assert await repo.get_artifact("ns", won.id, now=T0) is not None


async def test_completing_uploads_are_listed_by_id_in_pages(repo: MetadataRepository) -> None:
    ids = sorted([await _completing(repo) for _ in range(3)])
    await repo.create_upload(upload_session())

    first = await repo.list_completing_uploads(after_id="", limit=2)
    rest = await repo.list_completing_uploads(after_id=first[-1].id, limit=2)

    assert [s.id for s in first + rest] == ids


async def test_concurrent_commits_never_take_the_namespace_past_its_quota(repo: MetadataRepository) -> None:
    quota = 100

    async def commit(index: int) -> bool:
        try:
            await repo.commit_artifact(
                blob=blob_info(bytes([index]) * 30), artifact=new_artifact(), quota=quota, now=T0
            )
        except QuotaExceeded:
            return False
        return True

    outcomes = await asyncio.gather(*(commit(index) for index in range(8)))

    assert outcomes.count(True) == 3
    # Dedup does not discount: the same content again still counts, and is refused.
    with pytest.raises(QuotaExceeded):
        await repo.commit_artifact(
            blob=blob_info(bytes([0]) * 30), artifact=new_artifact(), quota=quota, now=T0
        )
    assert await repo.namespace_usage("ns", now=T0) == 90
    # Another namespace has its own quota.
    await repo.commit_artifact(blob=blob_info(b"x" * 30), artifact=new_artifact("other"), quota=quota, now=T0)


async def test_concurrent_creates_never_exceed_the_open_uploads_limit(repo: MetadataRepository) -> None:
    async def create() -> bool:
        try:
            await repo.create_upload(upload_session(), max_open=3)
        except TooManyUploads:
            return False
        return True

    outcomes = await asyncio.gather(*(create() for _ in range(8)))

    assert outcomes.count(True) == 3
    assert await repo.count_open_uploads("ns") == 3

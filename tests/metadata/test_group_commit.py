"""Concurrent artifact commits on SQLite share transactions: each is acknowledged only after its group's
COMMIT, a failing one does not fail the rest, and a failed COMMIT acknowledges none of the group."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import sqlalchemy as sa

from blobstore.errors import QuotaExceeded, StorageUnavailable
from blobstore.metadata.repository import MetadataRepository
from blobstore.models import CommitResult
from tests.metadata.helpers import T0, blob_info, new_artifact

SQLITE_ONLY = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


def group_writer(repo: MetadataRepository) -> sa.Engine:
    """The synchronous engine the repository's group commits run on."""
    writer = repo._sync_writer
    assert writer is not None
    return writer


def count_commits(repo: MetadataRepository) -> list[int]:
    """A one-element list counting the COMMITs of the repository's group commits."""
    counter = [0]
    writer = group_writer(repo)

    def on_commit(_conn: Any) -> None:
        counter[0] += 1

    sa.event.listen(writer, "commit", on_commit)
    return counter


async def commit_many(repo: MetadataRepository, count: int, *, quota: int | None = None) -> list[Any]:
    return await asyncio.gather(
        *(
            repo.commit_artifact(blob=blob_info(b"content %d" % i), artifact=new_artifact(), quota=quota)
            for i in range(count)
        ),
        return_exceptions=True,
    )


@SQLITE_ONLY
async def test_concurrent_commits_share_transactions_and_all_survive_a_reopen(database_url: str) -> None:
    repo = await MetadataRepository.open(database_url)
    commits = count_commits(repo)
    try:
        results = await commit_many(repo, 16)
    finally:
        await repo.close()

    assert all(isinstance(result, CommitResult) for result in results)
    assert commits[0] < 16
    reopened = await MetadataRepository.open(database_url)
    try:
        for result in results:
            assert await reopened.get_artifact("ns", result.artifact.id, now=T0) is not None
    finally:
        await reopened.close()


async def test_a_refused_commit_in_a_group_leaves_the_others_committed(repo: MetadataRepository) -> None:
    # Nine bytes each ("content 0" … "content 5"): the quota admits any three, whichever commit first.
    results = await commit_many(repo, 6, quota=27)

    committed = [result for result in results if isinstance(result, CommitResult)]
    refused = [result for result in results if isinstance(result, QuotaExceeded)]
    assert len(committed) == 3
    assert len(refused) == 3
    for result in committed:
        assert await repo.get_artifact("ns", result.artifact.id, now=T0) is not None
    assert await repo.namespace_usage("ns", now=T0) == 27


@SQLITE_ONLY
async def test_a_failed_group_commit_acknowledges_none_of_its_commits(repo: MetadataRepository) -> None:
    writer = group_writer(repo)

    def refuse(_conn: Any) -> None:
        raise StorageUnavailable("the commit failed")

    sa.event.listen(writer, "commit", refuse)
    results = await commit_many(repo, 8)
    sa.event.remove(writer, "commit", refuse)

    assert all(isinstance(result, StorageUnavailable) for result in results)
    assert (await repo.stats(now=T0))["artifacts"] == 0
    # The next group commits normally.
    assert isinstance((await commit_many(repo, 1))[0], CommitResult)


@SQLITE_ONLY
async def test_a_group_whose_commits_all_succeed_takes_no_savepoints(database_url: str) -> None:
    repo = await MetadataRepository.open(database_url)
    statements: list[str] = []

    def on_execute(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(statement)

    sa.event.listen(group_writer(repo), "before_cursor_execute", on_execute)
    try:
        results = await commit_many(repo, 16)
    finally:
        await repo.close()

    assert all(isinstance(result, CommitResult) for result in results)
    assert statements
    assert not [statement for statement in statements if "SAVEPOINT" in statement.upper()]

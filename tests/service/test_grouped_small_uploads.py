"""Small uploads that arrive together on local disk over SQLite: they share COMMITs, and when a commit
refuses some of them (the quota) or fails for all (a full disk), each failed upload removes its blob file and
no artifact without its content becomes visible."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from blobstore.config import Settings
from blobstore.errors import QuotaExceeded, StorageFull
from blobstore.models import Artifact, Caller
from blobstore.runtime import open_service
from blobstore.service import ArtifactService

IN_FLIGHT = 16
KiB = 1024
_WAIT = 30.0
"""A bound on waiting for the other uploads, so that a broken build fails instead of hanging."""


def local_sqlite(tmp_path: Path, **overrides: Any) -> Settings:
    return Settings(data_dir=tmp_path / "data", **overrides)


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[ArtifactService]:
    async with open_service(local_sqlite(tmp_path), migrate=True) as svc:
        yield svc


@pytest.fixture
def caller() -> Caller:
    return Caller(namespace="alpha", actor="tester")


def group_writer(service: ArtifactService) -> sa.Engine:
    writer = service.repo._sync_writer
    assert writer is not None
    return writer


def blob_files(service: ArtifactService) -> list[Path]:
    root = service.settings.data_dir / "blobs"
    return [Path(top) / name for top, _dirs, names in os.walk(root / "blobs") for name in names] + [
        root / "tmp" / name for name in os.listdir(root / "tmp")
    ]


async def upload_many(
    service: ArtifactService, caller: Caller, count: int, size: int = KiB
) -> list[Artifact | BaseException]:
    async def upload(number: int) -> Artifact:
        async def body() -> AsyncIterator[bytes]:
            yield number.to_bytes(4, "big") + os.urandom(size - 4)

        return await service.create_artifact(caller, body(), name=f"small-{number}.bin", expected_size=size)

    return await asyncio.gather(*(upload(n) for n in range(count)), return_exceptions=True)


def on_commit(service: ArtifactService, hook: Callable[[], None]) -> Callable[[], None]:
    """Run ``hook`` at every COMMIT of the group commits; the returned function removes it."""

    def listener(_conn: Any) -> None:
        hook()

    sa.event.listen(group_writer(service), "commit", listener)
    return lambda: sa.event.remove(group_writer(service), "commit", listener)


async def test_uploads_that_arrive_together_share_commits(service: ArtifactService, caller: Caller) -> None:
    commits: list[int] = []
    in_first_group: list[str] = []
    queued = service.repo._commits
    assert queued is not None

    def count_first_group(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if not commits and statement.lstrip().upper().startswith("INSERT INTO ARTIFACTS"):
            in_first_group.append(statement)

    def hold_the_first_until_the_rest_queue() -> None:
        # The first group's COMMIT waits until every other upload queued its commit: they then share one.
        if not commits:
            for _ in range(int(_WAIT * 100)):
                if len(in_first_group) + len(queued._queue) >= IN_FLIGHT:
                    break
                threading.Event().wait(0.01)
        commits.append(1)

    sa.event.listen(group_writer(service), "before_cursor_execute", count_first_group)
    remove = on_commit(service, hold_the_first_until_the_rest_queue)
    try:
        results = await upload_many(service, caller, IN_FLIGHT)
    finally:
        remove()
        sa.event.remove(group_writer(service), "before_cursor_execute", count_first_group)

    assert all(isinstance(result, Artifact) for result in results)
    assert len(commits) <= 2
    page = await service.list_artifacts(caller, limit=100)
    assert len(page.items) == IN_FLIGHT
    assert len(blob_files(service)) == IN_FLIGHT


async def test_a_failed_group_commit_fails_every_upload_and_leaves_no_file(
    service: ArtifactService, caller: Caller
) -> None:
    def disk_full() -> None:
        raise StorageFull("the metadata database is out of space")

    remove = on_commit(service, disk_full)
    try:
        results = await upload_many(service, caller, 8)
    finally:
        remove()

    assert all(isinstance(result, StorageFull) for result in results)
    assert (await service.list_artifacts(caller, limit=100)).items == []
    assert blob_files(service) == []


async def test_uploads_the_quota_refuses_inside_a_group_fail_alone(tmp_path: Path, caller: Caller) -> None:
    # Six uploads of 1 KiB at once against a 3 KiB quota: each passes the check before its bytes are received
    # (nothing is used yet), and the commits' own checks admit exactly three, whichever they are.
    async with open_service(local_sqlite(tmp_path, namespace_quota_bytes=3 * KiB), migrate=True) as service:
        results = await upload_many(service, caller, 6)

        committed = [result for result in results if isinstance(result, Artifact)]
        refused = [result for result in results if isinstance(result, QuotaExceeded)]
        assert len(committed) == 3
        assert len(refused) == 3
        listed = (await service.list_artifacts(caller, limit=100)).items
        assert {artifact.id for artifact in listed} == {artifact.id for artifact in committed}
        # The refused uploads removed their blob files: only the committed ones' remain.
        assert len(blob_files(service)) == 3

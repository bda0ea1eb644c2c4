"""Abandoned completions: a ``completing`` upload whose completer stopped renewing its lease goes back to
``open``, at the next cleanup run or the next request; a live one is left alone."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from blobstore.cleanup import run_cleanup
from blobstore.models import Caller, UploadState
from blobstore.runtime import cleanup_parts
from blobstore.service import ArtifactService
from tests.cleanup.helpers import UPLOAD_TTL, FakeClock, read_back

DATA = b"c" * 1024 + b"d" * 500


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def _stuck(service: ArtifactService, caller: Caller, owner: str) -> str:
    """An upload with every chunk left ``completing`` by ``owner`` (a process that is gone), lease fresh."""
    session = await service.uploads.begin(caller, name="stuck.bin", size=len(DATA), chunk_size=1024)
    await service.uploads.put_chunk(caller, session.id, 0, _once(DATA[:1024]))
    await service.uploads.put_chunk(caller, session.id, 1, _once(DATA[1024:]))
    now = service.clock()
    lease_until = now + service.uploads.leases.lease
    assert await service.repo.begin_completion(session.id, owner=owner, lease_until=lease_until, now=now)
    return session.id


async def _state(service: ArtifactService, caller: Caller, upload_id: str) -> UploadState:
    session = await service.repo.get_upload(caller.namespace, upload_id)
    assert session is not None
    return session.state


async def test_cleanup_gives_an_abandoned_completion_back_once_its_lease_ran_out(
    service: ArtifactService, caller: Caller, clock: FakeClock
) -> None:
    upload_id = await _stuck(service, caller, "P:gone:1")

    report = await run_cleanup(cleanup_parts(service), steps=["uploads"])
    assert "completions_recovered" not in report.step("uploads").details
    assert await _state(service, caller, upload_id) is UploadState.COMPLETING

    clock.advance(service.uploads.leases.lease.total_seconds() + 1)
    dry = await run_cleanup(cleanup_parts(service), steps=["uploads"], dry_run=True)
    assert dry.step("uploads").details["completions_recovered"] == 1
    assert await _state(service, caller, upload_id) is UploadState.COMPLETING
    report = await run_cleanup(cleanup_parts(service), steps=["uploads"])

    assert report.step("uploads").details["completions_recovered"] == 1
    assert await _state(service, caller, upload_id) is UploadState.OPEN
    artifact = await service.uploads.complete(caller, upload_id)
    assert await read_back(service, caller, artifact.id) == DATA


async def test_the_next_request_gives_an_abandoned_completion_back(
    service: ArtifactService, caller: Caller, clock: FakeClock
) -> None:
    upload_id = await _stuck(service, caller, "P:gone:1")
    assert (await service.uploads.status(caller, upload_id)).session.state is UploadState.COMPLETING

    clock.advance(service.uploads.leases.lease.total_seconds() + 1)
    status = await service.uploads.status(caller, upload_id)

    assert (status.session.state, status.missing) == (UploadState.OPEN, [])
    assert status.session.completion_owner is None


async def test_a_completion_that_keeps_renewing_is_not_expired_with_its_upload(
    service: ArtifactService, caller: Caller, clock: FakeClock
) -> None:
    upload_id = await _stuck(service, caller, "P:alive:1")
    clock.advance(UPLOAD_TTL + 1)
    assert await service.repo.renew_completion(
        upload_id, owner="P:alive:1", lease_until=clock() + service.uploads.leases.lease
    )

    report = await run_cleanup(cleanup_parts(service), steps=["uploads"])

    assert report.step("uploads").details["completing_deferred"] == 1
    assert "completions_recovered" not in report.step("uploads").details
    assert await _state(service, caller, upload_id) is UploadState.COMPLETING


@pytest.mark.parametrize(
    ("owner", "recovered"),
    [
        ("L:{other}:1", True),  # started by another holder of the data-directory lock: that process is gone
        ("L:{self}:1", False),  # this process's own completion
        ("P:{other}:1", False),  # a process without the lock (blobstore mcp) may still be alive
    ],
)
async def test_a_lock_holder_knows_a_previous_holders_completion_is_dead_without_waiting(
    service: ArtifactService, caller: Caller, owner: str, recovered: bool
) -> None:
    service.uploads.leases.sole_server = True
    upload_id = await _stuck(
        service, caller, owner.format(other="0" * 16, self=service.uploads.leases.instance)
    )

    state = (await service.uploads.get(caller, upload_id)).state

    assert state is (UploadState.OPEN if recovered else UploadState.COMPLETING)

"""TTL: an expired artifact is gone for readers the moment it expires; cleanup removes its row and says so."""

from __future__ import annotations

import pytest

from blobstore.cleanup import run_cleanup
from blobstore.errors import InvalidRequest, NotFound
from blobstore.events import ArtifactChange, ArtifactEvent
from blobstore.models import Caller
from blobstore.runtime import cleanup_parts
from blobstore.service import ArtifactService
from tests.cleanup.helpers import FakeClock, artifact_rows, read_back, upload


async def test_expired_artifact_is_not_found_before_any_cleanup(
    service: ArtifactService, caller: Caller, clock: FakeClock
) -> None:
    artifact = await upload(service, caller, b"short-lived" * 100, ttl_seconds=60)
    assert await read_back(service, caller, artifact.id) == b"short-lived" * 100
    clock.advance(60)
    with pytest.raises(NotFound):
        await service.get_artifact(caller, artifact.id)
    with pytest.raises(NotFound):
        await service.open_artifact(caller, artifact.id)
    with pytest.raises(NotFound):
        await service.read_window(caller, artifact.id, 0, 10)
    assert artifact.id not in {a.id for a in (await service.list_artifacts(caller)).items}
    # Logical expiry only: the row is still there until cleanup runs.
    assert [row["id"] for row in await artifact_rows(service)] == [artifact.id]


async def test_pinned_and_unexpired_artifacts_survive_expiry(
    service: ArtifactService, caller: Caller, clock: FakeClock
) -> None:
    pinned = await upload(service, caller, b"keep me", pinned=True)
    long_lived = await upload(service, caller, b"later", ttl_seconds=7200)
    doomed = await upload(service, caller, b"soon gone", ttl_seconds=10)
    clock.advance(3600)
    report = await run_cleanup(cleanup_parts(service), steps=["expire"])
    assert report.step("expire").items == 1
    assert report.step("expire").expired_bytes == len(b"soon gone")
    assert report.step("expire").bytes == 0  # nothing left storage yet: the blob step frees the blob
    assert {row["id"] for row in await artifact_rows(service)} == {pinned.id, long_lived.id}
    assert pinned.expires_at is None
    assert await read_back(service, caller, pinned.id) == b"keep me"
    with pytest.raises(NotFound):
        await service.get_artifact(caller, doomed.id)


async def test_ttl_above_the_maximum_is_refused(service: ArtifactService, caller: Caller) -> None:
    with pytest.raises(InvalidRequest):
        await upload(service, caller, b"x", ttl_seconds=service.settings.max_ttl_seconds + 1)


async def test_expiry_and_delete_notify_listeners(
    service: ArtifactService, caller: Caller, clock: FakeClock
) -> None:
    heard: list[ArtifactEvent] = []

    async def listen(event: ArtifactEvent) -> None:
        heard.append(event)

    unsubscribe = service.events.subscribe(listen)
    expiring = await upload(service, caller, b"one", ttl_seconds=5)
    deleted = await upload(service, caller, b"two")
    await service.delete_artifact(caller, deleted.id)
    clock.advance(5)
    await run_cleanup(cleanup_parts(service), steps=["expire"])
    assert [(e.change, e.artifact_id, e.namespace) for e in heard] == [
        (ArtifactChange.CREATED, expiring.id, "alpha"),
        (ArtifactChange.CREATED, deleted.id, "alpha"),
        (ArtifactChange.DELETED, deleted.id, "alpha"),
        (ArtifactChange.EXPIRED, expiring.id, "alpha"),
    ]
    assert heard[3].uri == f"blobstore://artifacts/{expiring.id}"
    unsubscribe()
    await upload(service, caller, b"three", ttl_seconds=5)
    clock.advance(5)
    await run_cleanup(cleanup_parts(service), steps=["expire"])
    assert len(heard) == 4


async def test_a_failing_listener_neither_undoes_the_change_nor_silences_others(
    service: ArtifactService, caller: Caller, caplog: pytest.LogCaptureFixture
) -> None:
    heard: list[str] = []

    async def broken(event: ArtifactEvent) -> None:
        raise RuntimeError("client went away")

    async def working(event: ArtifactEvent) -> None:
        heard.append(event.artifact_id)

    artifact = await upload(service, caller, b"data")
    service.events.subscribe(broken)
    service.events.subscribe(working)
    await service.delete_artifact(caller, artifact.id)
    assert heard == [artifact.id]
    assert await artifact_rows(service) == []
    assert "artifact event listener failed" in caplog.text


async def test_expiry_works_in_batches(service: ArtifactService, caller: Caller, clock: FakeClock) -> None:
    for index in range(7):
        await upload(service, caller, f"item {index}".encode(), ttl_seconds=1)
    clock.advance(1)
    report = await run_cleanup(cleanup_parts(service), steps=["expire"], batch_size=3)
    assert report.step("expire").items == 7
    assert await artifact_rows(service) == []

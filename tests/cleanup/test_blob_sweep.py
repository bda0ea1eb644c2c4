"""Blob sweep: referenced blobs survive; unreferenced ones go after the grace period and not before; a dedup
commit racing a sweep of the same content always ends with a readable artifact."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator

import anyio
import pytest

from blobstore.cleanup import run_cleanup
from blobstore.models import Caller
from blobstore.runtime import cleanup_parts
from blobstore.service import ArtifactService
from tests.cleanup.helpers import (
    GRACE,
    FakeClock,
    assert_consistent,
    blob_rows,
    deleted,
    read_back,
    storage_keys,
    sweep_blobs,
    upload,
)


async def test_referenced_blobs_survive_every_step(
    service: ArtifactService, caller: Caller, clock: FakeClock
) -> None:
    first = await upload(service, caller, b"shared content" * 500)
    second = await upload(service, caller, b"shared content" * 500, pinned=True)
    assert first.blob_id == second.blob_id
    await service.delete_artifact(caller, first.id)
    for _ in range(3):
        clock.advance(GRACE * 2)
        await run_cleanup(cleanup_parts(service))
    assert await read_back(service, caller, second.id) == b"shared content" * 500
    assert len(await blob_rows(service)) == 1
    await assert_consistent(service, swept=True)


async def test_unreferenced_blob_is_freed_after_the_grace_period_and_not_before(
    service: ArtifactService, caller: Caller, clock: FakeClock
) -> None:
    await deleted(service, caller, b"to be freed" * 1000)
    [row] = await blob_rows(service)

    first = await sweep_blobs(service)
    assert first.details["marked_unreferenced"] == 1
    assert first.items == 0
    clock.advance(GRACE - 1)
    assert (await sweep_blobs(service)).items == 0
    assert row["storage_key"] in await storage_keys(service)

    clock.advance(2)
    freed = await sweep_blobs(service)
    assert freed.items == 1
    assert freed.bytes == len(b"to be freed" * 1000)
    assert await blob_rows(service) == []
    assert row["storage_key"] not in await storage_keys(service)


async def test_expired_artifacts_blob_is_freed_only_a_grace_period_after_expiry(
    service: ArtifactService, caller: Caller, clock: FakeClock
) -> None:
    await upload(service, caller, b"expiring" * 100, ttl_seconds=30)
    clock.advance(30)
    report = await run_cleanup(cleanup_parts(service))
    assert report.step("expire").items == 1
    assert report.step("blobs").items == 0
    clock.advance(GRACE + 1)
    report = await run_cleanup(cleanup_parts(service))
    assert report.step("blobs").items == 1
    assert await storage_keys(service) == set()


async def test_a_blob_referenced_again_within_grace_restarts_its_grace_period(
    service: ArtifactService, caller: Caller, clock: FakeClock
) -> None:
    data = b"come back" * 300
    original = await deleted(service, caller, data)
    await sweep_blobs(service)  # marks it
    clock.advance(GRACE - 10)
    again = await deleted(service, caller, data)
    assert again.blob_id == original.blob_id
    clock.advance(20)
    # Unreferenced again only since this run: the earlier mark must not count.
    assert (await sweep_blobs(service)).items == 0
    clock.advance(GRACE + 1)
    assert (await sweep_blobs(service)).items == 1


async def test_upload_of_content_whose_blob_was_tombstoned_stores_a_new_generation(
    service: ArtifactService, caller: Caller, clock: FakeClock
) -> None:
    data = b"resurrected" * 700
    old = await deleted(service, caller, data)
    await service.repo.mark_unreferenced_blobs(now=clock())
    clock.advance(GRACE + 1)
    # The sweep has tombstoned the blob but not yet deleted its object (a crash or pause right here).
    claimed = await service.repo.claim_unreferenced_blobs(older_than=clock(), now=clock(), limit=10)
    assert [record.id for record in claimed] == [old.blob_id]

    fresh = await upload(service, caller, data)
    assert fresh.blob_id != old.blob_id
    await run_cleanup(cleanup_parts(service))  # finishes the tombstone: deletes the old generation only
    assert await read_back(service, caller, fresh.id) == data
    await assert_consistent(service, swept=True)


async def test_concurrent_dedup_uploads_and_sweeps_never_lose_an_artifact(
    service: ArtifactService, caller: Caller, clock: FakeClock
) -> None:
    """Rounds of: content unreferenced past its grace, then dedup uploads of it racing two sweeps."""
    contents = [f"racing content {n}".encode() * 400 for n in range(3)]
    survivors: dict[str, bytes] = {}
    for round_number in range(6):
        for data in contents:
            await deleted(service, caller, data)
        await sweep_blobs(service)
        clock.advance(GRACE + 1)
        results: list[tuple[str, bytes]] = []

        async def add(data: bytes, name: str, into: list[tuple[str, bytes]]) -> None:
            artifact = await upload(service, caller, data, name=name)
            into.append((artifact.id, data))

        async with anyio.create_task_group() as group:
            for index, data in enumerate(contents):
                group.start_soon(add, data, f"r{round_number}", results)
                if index == 1:
                    group.start_soon(sweep_blobs, service)
            group.start_soon(sweep_blobs, service)
        survivors.update(results)
        for artifact_id in list(survivors)[: -len(contents)]:
            await service.delete_artifact(caller, artifact_id)
            del survivors[artifact_id]
    for artifact_id, data in survivors.items():
        assert (
            hashlib.sha256(await read_back(service, caller, artifact_id)).digest()
            == hashlib.sha256(data).digest()
        )
    clock.advance(GRACE + 1)
    await run_cleanup(cleanup_parts(service))
    clock.advance(GRACE + 1)
    await run_cleanup(cleanup_parts(service))
    counts = await assert_consistent(service, swept=True)
    assert counts["artifacts"] == len(contents)


@pytest.mark.parametrize("steps", [["blobs"], ["orphans"]])
async def test_dry_run_changes_nothing(
    service: ArtifactService, caller: Caller, clock: FakeClock, steps: list[str]
) -> None:
    await deleted(service, caller, b"dry" * 100)
    await sweep_blobs(service)
    orphan = await service.blobs.put(_once(b"orphan bytes"), expected_size=len(b"orphan bytes"))
    clock.advance_past_storage(GRACE + 1)
    before_rows, before_keys = await blob_rows(service), await storage_keys(service)
    report = await run_cleanup(cleanup_parts(service), steps=steps, dry_run=True)  # type: ignore[arg-type]
    assert report.items == 1
    assert report.bytes == (len(b"dry" * 100) if steps == ["blobs"] else len(b"orphan bytes"))
    assert await blob_rows(service) == before_rows
    assert await storage_keys(service) == before_keys
    assert orphan.key in before_keys


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data

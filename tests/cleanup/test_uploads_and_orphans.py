"""Upload purge, staging leftovers and the orphan sweep."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from blobstore.cleanup import run_cleanup
from blobstore.errors import DigestMismatch, NotFound, UploadNotOpen
from blobstore.models import Caller
from blobstore.runtime import cleanup_parts
from blobstore.service import ArtifactService
from tests.cleanup.helpers import (
    GRACE,
    UPLOAD_TTL,
    FakeClock,
    assert_consistent,
    blob_rows,
    read_back,
    staging_refs,
    storage_keys,
    upload,
)


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def test_expired_upload_sessions_are_purged_and_open_ones_kept(
    service: ArtifactService, caller: Caller, clock: FakeClock
) -> None:
    stale = await service.uploads.begin(caller, name="stale.bin", size=2048, chunk_size=1024)
    await service.uploads.put_chunk(caller, stale.id, 0, _once(b"s" * 1024))
    clock.advance(UPLOAD_TTL - 100)
    fresh = await service.uploads.begin(caller, name="fresh.bin", size=1024, chunk_size=1024)
    await service.uploads.put_chunk(caller, fresh.id, 0, _once(b"f" * 1024))
    clock.advance(100)

    report = await run_cleanup(cleanup_parts(service), steps=["uploads"])
    assert report.step("uploads").items == 1
    assert report.step("uploads").bytes == 1024
    with pytest.raises(NotFound):
        await service.uploads.get(caller, stale.id)
    assert await staging_refs(service) == {fresh.staging_ref}
    artifact = await service.uploads.complete(caller, fresh.id)
    assert await read_back(service, caller, artifact.id) == b"f" * 1024


async def test_an_upload_whose_completion_failed_is_purged_with_its_staging_when_it_expires(
    service: ArtifactService, caller: Caller, clock: FakeClock
) -> None:
    wrong = "0" * 64
    session = await service.uploads.begin(caller, name="f.bin", size=2048, chunk_size=1024, sha256=wrong)
    for index in range(2):
        await service.uploads.put_chunk(caller, session.id, index, _once(bytes([index]) * 1024))
    # The completion took the staged chunks over (on local disk: sealed the data file) before it failed.
    with pytest.raises(DigestMismatch):
        await service.uploads.complete(caller, session.id)
    assert await staging_refs(service) == {session.staging_ref}
    clock.advance(UPLOAD_TTL)

    report = await run_cleanup(cleanup_parts(service), steps=["uploads"])
    assert report.step("uploads").items == 1
    assert await staging_refs(service) == set()
    assert await storage_keys(service) == set()


async def test_a_chunk_sent_after_expiry_is_refused(
    service: ArtifactService, caller: Caller, clock: FakeClock
) -> None:
    session = await service.uploads.begin(caller, name="late.bin", size=2048, chunk_size=1024)
    clock.advance(UPLOAD_TTL)
    with pytest.raises(UploadNotOpen):
        await service.uploads.put_chunk(caller, session.id, 0, _once(b"x" * 1024))


async def test_finished_upload_rows_are_dropped_after_their_lease(
    service: ArtifactService, caller: Caller, clock: FakeClock
) -> None:
    done = await service.uploads.begin(caller, name="done.bin", size=1024, chunk_size=1024, ttl_seconds=7200)
    await service.uploads.put_chunk(caller, done.id, 0, _once(b"d" * 1024))
    artifact = await service.uploads.complete(caller, done.id)
    aborted = await service.uploads.begin(caller, name="gone.bin")
    await service.uploads.abort(caller, aborted.id)
    clock.advance(UPLOAD_TTL)
    report = await run_cleanup(cleanup_parts(service), steps=["uploads"])
    assert report.step("uploads").details["finished_rows"] == 2
    for upload_id in (done.id, aborted.id):
        with pytest.raises(NotFound):
            await service.uploads.get(caller, upload_id)
    assert await read_back(service, caller, artifact.id) == b"d" * 1024


async def test_staging_without_a_session_is_freed_only_after_the_grace_period(
    service: ArtifactService, caller: Caller, clock: FakeClock
) -> None:
    # What a crash between creating staging and inserting the session row leaves behind.
    leftover = await service.blobs.stage_begin("leftoverupload0000001", chunk_size=1024)
    await service.blobs.stage_put(leftover, 0, _once(b"l" * 1024))
    kept = await service.uploads.begin(caller, name="kept.bin")
    await service.blobs.stage_put(kept.staging_ref, 0, _once(b"k" * 1024))

    report = await run_cleanup(cleanup_parts(service), steps=["uploads"])
    assert "staging_leftovers" not in report.step("uploads").details
    assert leftover in await staging_refs(service)
    clock.advance_past_storage(GRACE + 1)
    report = await run_cleanup(cleanup_parts(service), steps=["uploads"])
    assert report.step("uploads").details["staging_leftovers"] == 1
    assert await staging_refs(service) == {kept.staging_ref}


async def test_orphan_objects_are_swept_after_the_grace_period_and_live_ones_never(
    service: ArtifactService, caller: Caller, clock: FakeClock
) -> None:
    live = await upload(service, caller, b"live" * 100, pinned=True)
    # A generation published whose row was never committed (a crash between the two).
    orphan = await service.blobs.put(_once(b"orphan" * 50))
    report = await run_cleanup(cleanup_parts(service), steps=["orphans"])
    assert report.step("orphans").items == 0
    assert orphan.key in await storage_keys(service)

    clock.advance_past_storage(GRACE + 1)
    report = await run_cleanup(cleanup_parts(service), steps=["orphans"])
    assert report.step("orphans").items == 1
    assert report.step("orphans").bytes == len(b"orphan" * 50)
    [row] = await blob_rows(service)
    assert await storage_keys(service) == {row["storage_key"]}
    assert await read_back(service, caller, live.id) == b"live" * 100


async def test_full_cleanup_on_a_mixed_store_leaves_it_consistent(
    service: ArtifactService, caller: Caller, clock: FakeClock
) -> None:
    keep = await upload(service, caller, b"keep" * 1000, ttl_seconds=10 * GRACE)
    await upload(service, caller, b"keep" * 1000, ttl_seconds=5)
    await upload(service, caller, b"other" * 1000, ttl_seconds=5)
    await service.blobs.put(_once(b"stray"))
    await service.uploads.begin(caller, name="never finished", size=4096, chunk_size=1024)
    clock.advance(UPLOAD_TTL)
    await run_cleanup(cleanup_parts(service))
    clock.advance(GRACE + 1)
    await run_cleanup(cleanup_parts(service))
    counts = await assert_consistent(service, swept=True)
    assert counts == {"artifacts": 1, "blobs": 1, "objects": 1}
    assert await read_back(service, caller, keep.id) == b"keep" * 1000

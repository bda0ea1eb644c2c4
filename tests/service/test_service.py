"""ArtifactService over every backend: store, dedup, read windows, list, delete, TTL, chunked uploads."""

from __future__ import annotations

import hashlib
import os
from datetime import timedelta

import anyio
import pytest

from blobstore.errors import (
    DigestMismatch,
    InvalidRange,
    NotFound,
    RangeNotSatisfiable,
    SizeMismatch,
    UploadIncomplete,
    UploadNotOpen,
)
from blobstore.models import Caller, UploadState
from blobstore.service import ArtifactService
from tests.fixtures.streams import chunks_of, read_back
from tests.service.scenarios import assert_a_conflicting_chunk_keeps_the_first


async def test_stored_artifact_reads_back_with_its_sha256(service: ArtifactService, caller: Caller) -> None:
    data = os.urandom(300_000)
    artifact = await service.create_artifact(caller, chunks_of(data), name="x.bin")
    assert artifact.sha256 == hashlib.sha256(data).hexdigest()
    assert artifact.size == len(data)
    assert artifact.uri == f"blobstore://artifacts/{artifact.id}"
    assert await read_back(service, caller, artifact.id) == data


async def test_identical_content_dedups_onto_one_blob_after_receiving_all_bytes(
    service: ArtifactService, caller: Caller, other: Caller
) -> None:
    data = os.urandom(150_000)
    first = await service.create_artifact(caller, chunks_of(data), name="a")
    second = await service.create_artifact(other, chunks_of(data), name="b")
    assert first.id != second.id
    assert first.blob_id == second.blob_id
    keys = [obj.key async for obj in service.blobs.iter_objects()]
    assert len(keys) == 1


async def test_concurrent_writes_of_the_same_content_end_with_one_blob(
    service: ArtifactService, caller: Caller
) -> None:
    data = os.urandom(200_000)
    results = []

    async def store(index: int) -> None:
        results.append(await service.create_artifact(caller, chunks_of(data, 7_000), name=f"c{index}"))

    async with anyio.create_task_group() as group:
        for index in range(4):
            group.start_soon(store, index)
    assert len({artifact.blob_id for artifact in results}) == 1
    assert len([obj async for obj in service.blobs.iter_objects()]) == 1
    for artifact in results:
        assert await read_back(service, caller, artifact.id) == data


async def test_wrong_expected_digest_or_size_stores_nothing(service: ArtifactService, caller: Caller) -> None:
    data = os.urandom(50_000)
    with pytest.raises(DigestMismatch):
        await service.create_artifact(caller, chunks_of(data), name="x", expected_sha256="0" * 64)
    with pytest.raises(SizeMismatch):
        await service.create_artifact(caller, chunks_of(data), name="x", expected_size=len(data) + 1)
    assert [obj async for obj in service.blobs.iter_objects()] == []
    page = await service.list_artifacts(caller)
    assert page.items == []


async def test_other_namespace_gets_not_found_exactly_like_a_missing_id(
    service: ArtifactService, caller: Caller, other: Caller
) -> None:
    artifact = await service.create_artifact(caller, chunks_of(b"secret"), name="s")
    for attempt in (artifact.id, "a_" + "x" * 24):
        with pytest.raises(NotFound):
            await service.get_artifact(other, attempt)
        with pytest.raises(NotFound):
            await service.read_window(other, attempt, 0, 10)
        with pytest.raises(NotFound):
            await service.delete_artifact(other, attempt)
    assert (await service.get_artifact(caller, artifact.id)).id == artifact.id


async def test_windows_are_clamped_and_identical_on_every_read(
    service: ArtifactService, caller: Caller
) -> None:
    data = os.urandom(3 * 1024 * 1024 + 17)
    artifact = await service.create_artifact(caller, chunks_of(data, 1 << 20), name="big")
    limit = service.settings.mcp_window_max
    _a, win, first = await service.read_window(caller, artifact.id, 5, 10 * limit)
    assert win.length == limit
    assert first == data[5 : 5 + limit]
    _a, _w, again = await service.read_window(caller, artifact.id, 5, 10 * limit)
    assert again == first
    _a, tail, rest = await service.read_window(caller, artifact.id, len(data) - 3, 100)
    assert rest == data[-3:]
    assert tail.eof
    _a, end, empty = await service.read_window(caller, artifact.id, len(data), None)
    assert empty == b""
    assert end.eof
    with pytest.raises(RangeNotSatisfiable):
        await service.read_window(caller, artifact.id, len(data) + 1, None)
    with pytest.raises(InvalidRange):
        await service.read_window(caller, artifact.id, 0, 0)


async def test_listing_pages_return_each_artifact_once(service: ArtifactService, caller: Caller) -> None:
    made = {(await service.create_artifact(caller, chunks_of(b"%d" % i), name=f"n{i}")).id for i in range(25)}
    seen: list[str] = []
    cursor = None
    while True:
        page = await service.list_artifacts(caller, limit=7, cursor=cursor)
        seen.extend(item.id for item in page.items)
        # An artifact added mid-listing never makes an earlier one appear twice.
        await service.create_artifact(caller, chunks_of(b"late"), name="late")
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert len(seen) == len(set(seen))
    assert made <= set(seen)


async def test_expired_artifacts_are_not_found_at_once(service: ArtifactService, caller: Caller) -> None:
    artifact = await service.create_artifact(caller, chunks_of(b"short-lived"), name="t", ttl_seconds=60)
    real_clock = service.clock.source
    service.clock.source = lambda: real_clock() + timedelta(seconds=61)
    try:
        with pytest.raises(NotFound):
            await service.get_artifact(caller, artifact.id)
        assert (await service.list_artifacts(caller)).items == []
    finally:
        service.clock.source = real_clock


async def test_pinned_artifacts_never_expire(service: ArtifactService, caller: Caller) -> None:
    artifact = await service.create_artifact(caller, chunks_of(b"keep"), name="k", ttl_seconds=60)
    await service.update_artifact(caller, artifact.id, pinned=True)
    real_clock = service.clock.source
    service.clock.source = lambda: real_clock() + timedelta(days=365)
    try:
        assert (await service.get_artifact(caller, artifact.id)).pinned
    finally:
        service.clock.source = real_clock


async def test_deleted_artifact_is_gone(service: ArtifactService, caller: Caller) -> None:
    artifact = await service.create_artifact(caller, chunks_of(b"bye"), name="d")
    await service.delete_artifact(caller, artifact.id)
    with pytest.raises(NotFound):
        await service.get_artifact(caller, artifact.id)


async def test_chunked_upload_out_of_order_with_resend_completes_once(
    service: ArtifactService, caller: Caller
) -> None:
    chunk = 64 * 1024
    data = os.urandom(5 * chunk + 123)
    session = await service.uploads.begin(
        caller, name="up.bin", size=len(data), sha256=hashlib.sha256(data).hexdigest(), chunk_size=chunk
    )
    order = [3, 0, 5, 1, 4, 2, 3]
    for index in order:
        await service.uploads.put_chunk(
            caller, session.id, index, chunks_of(data[index * chunk : (index + 1) * chunk])
        )
    status = await service.uploads.status(caller, session.id)
    assert status.missing == []
    assert status.received_bytes == len(data)
    first = await service.uploads.complete(caller, session.id)
    again = await service.uploads.complete(caller, session.id)
    assert first.id == again.id
    assert await read_back(service, caller, first.id) == data
    with pytest.raises(UploadNotOpen):
        await service.uploads.put_chunk(caller, session.id, 0, chunks_of(data[:chunk]))


async def test_chunk_resent_with_different_bytes_is_a_conflict_and_keeps_the_first(
    service: ArtifactService, caller: Caller
) -> None:
    await assert_a_conflicting_chunk_keeps_the_first(service, caller, chunk=64 * 1024, size=2 * 64 * 1024)


async def test_incomplete_or_wrong_digest_completion_leaves_the_upload_open(
    service: ArtifactService, caller: Caller
) -> None:
    chunk = 64 * 1024
    data = os.urandom(2 * chunk)
    session = await service.uploads.begin(caller, name="c", size=len(data), chunk_size=chunk)
    await service.uploads.put_chunk(caller, session.id, 1, chunks_of(data[chunk:]))
    with pytest.raises(UploadIncomplete) as caught:
        await service.uploads.complete(caller, session.id)
    assert caught.value.details["missing"] == [0]
    await service.uploads.put_chunk(caller, session.id, 0, chunks_of(data[:chunk]))
    with pytest.raises(DigestMismatch):
        await service.uploads.complete(caller, session.id, sha256="f" * 64)
    assert (await service.uploads.status(caller, session.id)).session.state is UploadState.OPEN
    assert [obj async for obj in service.blobs.iter_objects()] == []
    artifact = await service.uploads.complete(caller, session.id, sha256=hashlib.sha256(data).hexdigest())
    assert artifact.size == len(data)


async def test_aborted_upload_refuses_chunks_and_frees_staging(
    service: ArtifactService, caller: Caller
) -> None:
    session = await service.uploads.begin(caller, name="a", size=10, chunk_size=1024)
    await service.uploads.put_chunk(caller, session.id, 0, chunks_of(b"0123456789"))
    await service.uploads.abort(caller, session.id)
    await service.uploads.abort(caller, session.id)
    with pytest.raises(UploadNotOpen):
        await service.uploads.put_chunk(caller, session.id, 0, chunks_of(b"0123456789"))
    assert [entry async for entry in service.blobs.iter_staging()] == []


async def test_uploads_of_another_namespace_are_not_found(
    service: ArtifactService, caller: Caller, other: Caller
) -> None:
    session = await service.uploads.begin(caller, name="mine", size=4, chunk_size=1024)
    for call in (
        service.uploads.status(other, session.id),
        service.uploads.put_chunk(other, session.id, 0, chunks_of(b"abcd")),
        service.uploads.complete(other, session.id),
        service.uploads.abort(other, session.id),
    ):
        with pytest.raises(NotFound):
            await call

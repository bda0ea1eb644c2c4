"""The tail of a tus upload in the metadata: compare-and-set writes, staleness, cascade."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import anyio

from blobstore.ids import new_upload_id
from blobstore.metadata.repository import MetadataRepository
from blobstore.models import ChunkRecord, UploadSession, UploadState, UploadTail
from blobstore.tus_uploads import measure

CHUNK = 1024
NOW = datetime(2025, 1, 1, tzinfo=UTC)


def session(upload_id: str | None = None, size: int = 10 * CHUNK) -> UploadSession:
    return UploadSession(
        id=upload_id or new_upload_id(),
        namespace="default",
        name="tail.bin",
        mime_type=None,
        declared_size=size,
        declared_sha256=None,
        chunk_size=CHUNK,
        staging_ref="memory:tail",
        state=UploadState.OPEN,
        ttl_seconds=None,
        metadata={},
        protocol="tus",
        created_at=NOW,
        updated_at=NOW,
        expires_at=NOW + timedelta(days=1),
        artifact_id=None,
    )


def chunk(upload_id: str, index: int, size: int = CHUNK) -> ChunkRecord:
    return ChunkRecord(upload_id, index, size, "0" * 64, "0" * 32, NOW)


async def new_upload(repo: MetadataRepository) -> str:
    created = session()
    await repo.create_upload(created)
    return created.id


async def test_of_two_writers_that_read_the_same_tail_exactly_one_wins(repo: MetadataRepository) -> None:
    upload_id = await new_upload(repo)
    assert await repo.put_tail(upload_id, expected_end=None, offset=0, data=b"abc", chunk_size=CHUNK, now=NOW)
    results: list[bool] = []

    async def write(data: bytes) -> None:
        results.append(
            await repo.put_tail(upload_id, expected_end=3, offset=0, data=data, chunk_size=CHUNK, now=NOW)
        )

    async with anyio.create_task_group() as group:
        for data in (b"abcdef", b"abcxyz", b"abc123"):
            group.start_soon(write, data)

    assert sorted(results) == [False, False, True]
    tail = await repo.get_tail(upload_id)
    assert tail is not None
    assert tail.data in {b"abcdef", b"abcxyz", b"abc123"}


async def test_a_second_first_write_loses_to_the_first(repo: MetadataRepository) -> None:
    upload_id = await new_upload(repo)

    first = await repo.put_tail(upload_id, expected_end=None, offset=0, data=b"a", chunk_size=CHUNK, now=NOW)
    second = await repo.put_tail(upload_id, expected_end=None, offset=0, data=b"b", chunk_size=CHUNK, now=NOW)

    assert (first, second) == (True, False)
    assert await repo.get_tail(upload_id) == UploadTail(upload_id, 0, b"a", NOW)


async def test_a_tail_is_refused_once_a_staged_chunk_covers_its_offset(repo: MetadataRepository) -> None:
    upload_id = await new_upload(repo)
    await repo.record_chunk(chunk(upload_id, 0))

    refused = await repo.put_tail(
        upload_id, expected_end=None, offset=0, data=b"x", chunk_size=CHUNK, now=NOW
    )
    accepted = await repo.put_tail(
        upload_id, expected_end=None, offset=CHUNK, data=b"x", chunk_size=CHUNK, now=NOW
    )

    assert (refused, accepted) == (False, True)


async def test_deleting_the_upload_deletes_its_tail(repo: MetadataRepository) -> None:
    upload_id = await new_upload(repo)
    await repo.put_tail(upload_id, expected_end=None, offset=0, data=b"abc", chunk_size=CHUNK, now=NOW)

    await repo.delete_upload(upload_id)

    assert await repo.get_tail(upload_id) is None


def test_offset_counts_full_chunks_and_the_tail_that_follows_them() -> None:
    upload = session()
    chunks = [chunk(upload.id, 0), chunk(upload.id, 1)]

    progress = measure(upload, chunks, UploadTail(upload.id, 2 * CHUNK, b"xyz", NOW))

    assert (progress.offset, progress.full_chunks, progress.tail, progress.tail_end) == (
        2 * CHUNK + 3,
        2,
        b"xyz",
        2 * CHUNK + 3,
    )


def test_a_tail_overtaken_by_a_staged_chunk_is_not_counted_twice() -> None:
    upload = session()
    # A crash between staging chunk 1 and writing the new tail leaves the old tail at chunk 1's offset.
    chunks = [chunk(upload.id, 0), chunk(upload.id, 1)]

    progress = measure(upload, chunks, UploadTail(upload.id, CHUNK, b"old", NOW))

    assert (progress.offset, progress.tail, progress.tail_end) == (2 * CHUNK, b"", CHUNK + 3)


def test_the_short_last_chunk_ends_the_upload() -> None:
    upload = session(size=2 * CHUNK + 10)

    progress = measure(upload, [chunk(upload.id, 0), chunk(upload.id, 1), chunk(upload.id, 2, 10)], None)

    assert progress.offset == 2 * CHUNK + 10
    assert progress.received_all

"""Downloads: verified whole files, windows, resume from ``.part`` within a call and across calls."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from blobstore.client import AsyncBlobstoreClient, RetryPolicy
from blobstore.errors import (
    DigestMismatch,
    InvalidRange,
    RangeNotSatisfiable,
    ServerUnreachable,
    StorageUnavailable,
)
from tests.client.conftest import ClientFactory
from tests.client.faults import Fault, FaultyTransport, content_get

SIZE = 300_000


@pytest.fixture
async def stored(client: AsyncBlobstoreClient) -> tuple[str, bytes]:
    data = os.urandom(SIZE)
    result = await client.upload(data, name="data.bin", chunk_size=64 * 1024)
    return result.artifact.id, data


def range_headers(transport: FaultyTransport) -> list[str]:
    return [s.headers.get("range", "") for s in transport.seen if s.path.endswith("/content")]


async def test_whole_download_is_verified_and_renamed_into_place(
    client: AsyncBlobstoreClient, stored: tuple[str, bytes], tmp_path: Path
) -> None:
    artifact_id, data = stored

    result = await client.download(artifact_id, tmp_path / "out.bin")

    assert result.verified
    assert (tmp_path / "out.bin").read_bytes() == data
    assert not (tmp_path / "out.bin.part").exists()
    assert not (tmp_path / "out.bin.part.json").exists()


async def test_download_into_a_directory_uses_the_artifact_name(
    client: AsyncBlobstoreClient, stored: tuple[str, bytes], tmp_path: Path
) -> None:
    artifact_id, data = stored
    (tmp_path / "dir").mkdir()

    result = await client.download(artifact_id, tmp_path / "dir")

    assert result.path == tmp_path / "dir" / "data.bin"
    assert result.path.read_bytes() == data


async def test_range_download_writes_exactly_the_window(
    client: AsyncBlobstoreClient, transport: FaultyTransport, stored: tuple[str, bytes], tmp_path: Path
) -> None:
    artifact_id, data = stored

    result = await client.download(artifact_id, tmp_path / "part.bin", range=(1000, 71_000))

    assert (tmp_path / "part.bin").read_bytes() == data[1000:71_000]
    assert not result.verified
    assert range_headers(transport) == ["bytes=1000-70999"]


@pytest.mark.parametrize("window", [(-1, 5), (10, 5)])
async def test_malformed_window_is_refused(
    client: AsyncBlobstoreClient, stored: tuple[str, bytes], tmp_path: Path, window: tuple[int, int]
) -> None:
    with pytest.raises(InvalidRange):
        await client.download(stored[0], tmp_path / "x", range=window)


async def test_window_past_the_end_is_not_satisfiable(
    client: AsyncBlobstoreClient, stored: tuple[str, bytes], tmp_path: Path
) -> None:
    with pytest.raises(RangeNotSatisfiable):
        await client.download(stored[0], tmp_path / "x", range=(0, SIZE + 1))


async def test_connection_cut_midway_resumes_from_the_bytes_already_written(
    client: AsyncBlobstoreClient, transport: FaultyTransport, stored: tuple[str, bytes], tmp_path: Path
) -> None:
    artifact_id, data = stored
    transport.add(Fault(content_get(), "cut", after_bytes=100_000))

    result = await client.download(artifact_id, tmp_path / "out.bin")

    assert (tmp_path / "out.bin").read_bytes() == data
    assert result.verified
    assert range_headers(transport) == [f"bytes=0-{SIZE - 1}", f"bytes=100000-{SIZE - 1}"]


async def download_cut_after(
    make_client: ClientFactory, transport: FaultyTransport, artifact_id: str, path: Path, after_bytes: int
) -> None:
    """A download, without retries, whose connection is reset after ``after_bytes``: it fails, leaving a
    partial file."""
    transport.add(Fault(content_get(), "cut", after_bytes=after_bytes))
    async with make_client(retry=RetryPolicy(attempts=1)) as client:
        with pytest.raises(ServerUnreachable):
            await client.download(artifact_id, path)


async def test_interrupted_download_resumes_in_a_later_call_with_if_range(
    make_client: ClientFactory, transport: FaultyTransport, stored: tuple[str, bytes], tmp_path: Path
) -> None:
    artifact_id, data = stored
    await download_cut_after(make_client, transport, artifact_id, tmp_path / "out.bin", 120_000)
    assert (tmp_path / "out.bin.part").stat().st_size == 120_000
    transport.seen.clear()

    async with make_client() as client:
        etag = (await client.get_artifact(artifact_id)).etag
        result = await client.download(artifact_id, tmp_path / "out.bin")

    assert result.resumed_from == 120_000
    assert result.bytes_received == SIZE - 120_000
    assert (tmp_path / "out.bin").read_bytes() == data
    (resumed,) = [s for s in transport.seen if s.path.endswith("/content")]
    assert resumed.headers["range"] == f"bytes=120000-{SIZE - 1}"
    assert resumed.headers["if-range"] == etag
    assert not (tmp_path / "out.bin.part").exists()


async def test_corrupt_partial_file_fails_verification_and_is_discarded(
    make_client: ClientFactory, transport: FaultyTransport, stored: tuple[str, bytes], tmp_path: Path
) -> None:
    artifact_id, _ = stored
    await download_cut_after(make_client, transport, artifact_id, tmp_path / "out.bin", 50_000)
    part = tmp_path / "out.bin.part"
    part.write_bytes(b"\0" * 50_000)

    async with make_client() as client:
        with pytest.raises(DigestMismatch):
            await client.download(artifact_id, tmp_path / "out.bin")

    assert not part.exists()
    assert not (tmp_path / "out.bin").exists()


async def test_partial_file_of_another_artifact_is_not_resumed(
    client: AsyncBlobstoreClient, transport: FaultyTransport, stored: tuple[str, bytes], tmp_path: Path
) -> None:
    artifact_id, data = stored
    (tmp_path / "out.bin.part").write_bytes(b"x" * 1000)
    (tmp_path / "out.bin.part.json").write_text(
        '{"artifact_id": "a_other", "etag": "x", "start": 0, "end": 1}'
    )

    await client.download(artifact_id, tmp_path / "out.bin")

    assert (tmp_path / "out.bin").read_bytes() == data
    assert range_headers(transport) == [f"bytes=0-{SIZE - 1}"]


async def test_download_progress_reaches_the_window_length(
    client: AsyncBlobstoreClient, stored: tuple[str, bytes], tmp_path: Path
) -> None:
    calls: list[tuple[int, int]] = []

    await client.download(stored[0], tmp_path / "o", progress=lambda d, t: calls.append((d, t)))

    assert calls[-1] == (SIZE, SIZE)


async def test_empty_artifact_downloads_as_an_empty_file(
    client: AsyncBlobstoreClient, tmp_path: Path
) -> None:
    result = await client.upload(b"", name="empty")

    downloaded = await client.download(result.artifact.id, tmp_path / "empty")

    assert downloaded.path.read_bytes() == b""
    assert result.artifact.size == 0


async def test_whole_body_from_a_server_ignoring_range_still_yields_the_window(
    client: AsyncBlobstoreClient, transport: FaultyTransport, stored: tuple[str, bytes], tmp_path: Path
) -> None:
    artifact_id, data = stored
    transport.add(Fault(content_get(), "norange"))

    await client.download(artifact_id, tmp_path / "part.bin", range=(1000, 71_000))

    assert (tmp_path / "part.bin").read_bytes() == data[1000:71_000]


async def test_whole_body_answer_to_a_resume_restarts_the_partial_file(
    make_client: ClientFactory, transport: FaultyTransport, stored: tuple[str, bytes], tmp_path: Path
) -> None:
    artifact_id, data = stored
    transport.add(Fault(content_get(), "cut", after_bytes=90_000))
    transport.add(Fault(content_get(), "norange"))

    async with make_client() as client:
        result = await client.download(artifact_id, tmp_path / "out.bin")

    assert result.verified
    assert (tmp_path / "out.bin").read_bytes() == data


async def test_unwritable_destination_is_a_one_line_local_error(
    client: AsyncBlobstoreClient, stored: tuple[str, bytes], tmp_path: Path
) -> None:
    with pytest.raises(StorageUnavailable) as caught:
        await client.download(stored[0], tmp_path / "missing-dir" / "out.bin")

    assert caught.value.message.startswith("local file error: ")
    assert str(tmp_path) not in caught.value.message


async def test_bodies_that_keep_ending_early_fail_after_the_retries(
    client: AsyncBlobstoreClient, transport: FaultyTransport, stored: tuple[str, bytes], tmp_path: Path
) -> None:
    transport.add(Fault(content_get(), "short", times=10, after_bytes=0))

    with pytest.raises(StorageUnavailable):
        await client.download(stored[0], tmp_path / "out.bin")

    assert len(range_headers(transport)) == 3

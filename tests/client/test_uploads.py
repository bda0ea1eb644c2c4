"""Uploads from paths, bytes and async iterators: parallel chunks, integrity claims, progress, retries."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
import xxhash

from blobstore.client import AsyncBlobstoreClient, RetryPolicy
from blobstore.client.chunks import OrderedDigest
from blobstore.errors import InvalidRequest, NotFound, ServerUnreachable
from tests.client.conftest import CHUNK, ClientFactory, write_random
from tests.client.faults import Fault, FaultyTransport, chunk_put, path_is


async def read_back(client: AsyncBlobstoreClient, artifact_id: str, tmp_path: Path) -> bytes:
    result = await client.download(artifact_id, tmp_path / f"{artifact_id}.out")
    return result.path.read_bytes()


async def test_file_upload_sends_every_chunk_and_reads_back_identical(
    client: AsyncBlobstoreClient, transport: FaultyTransport, tmp_path: Path
) -> None:
    data = write_random(tmp_path / "report.pdf", 10 * CHUNK + 123)

    result = await client.upload(tmp_path / "report.pdf")

    assert result.chunks_sent == 11
    assert result.chunks_skipped == 0
    assert sorted(transport.chunk_indexes_put()) == list(range(11))
    assert result.artifact.name == "report.pdf"
    assert result.artifact.sha256 == hashlib.sha256(data).hexdigest()
    assert await read_back(client, result.artifact.id, tmp_path) == data


async def test_begin_declares_the_size_and_the_completion_the_sha256_hashed_while_sending(
    client: AsyncBlobstoreClient, transport: FaultyTransport, tmp_path: Path
) -> None:
    data = write_random(tmp_path / "a.bin", 3 * CHUNK + 5)

    await client.upload(tmp_path / "a.bin")

    (begin,) = [s for s in transport.seen if s.method == "POST" and s.path == "/v1/uploads"]
    declared = json.loads(begin.body)
    assert declared["size"] == len(data)
    assert "sha256" not in declared  # no direct uploads here: no pass over the file before the first chunk
    (complete,) = [s for s in transport.seen if s.method == "POST" and s.path.endswith("/complete")]
    assert json.loads(complete.body)["sha256"] == hashlib.sha256(data).hexdigest()


async def test_chunks_hashed_in_any_order_and_more_than_once_give_the_sha256_of_the_whole() -> None:
    pieces = [os.urandom(100) for _ in range(5)]
    digest = OrderedDigest(5, lambda func, *args: anyio.to_thread.run_sync(func, *args))
    for index in (2, 0, 2, 4, 1, 0, 3):
        await digest.add(index, pieces[index])
    assert digest.hexdigest() == hashlib.sha256(b"".join(pieces)).hexdigest()


async def test_a_digest_missing_a_chunk_refuses_to_answer() -> None:
    digest = OrderedDigest(3, lambda func, *args: anyio.to_thread.run_sync(func, *args))
    await digest.add(0, b"a")
    await digest.add(2, b"c")
    with pytest.raises(RuntimeError, match="2 chunks were not hashed"):
        digest.hexdigest()


async def test_the_sha256_declared_at_completion_survives_a_chunk_sent_twice(
    client: AsyncBlobstoreClient, transport: FaultyTransport, tmp_path: Path
) -> None:
    data = write_random(tmp_path / "a.bin", 12 * CHUNK + 1)
    transport.faults.append(Fault(match=chunk_put(0), kind="status", status=503, times=1))

    result = await client.upload(tmp_path / "a.bin", parallel=4)

    (complete,) = [s for s in transport.seen if s.method == "POST" and s.path.endswith("/complete")]
    assert json.loads(complete.body)["sha256"] == hashlib.sha256(data).hexdigest()
    assert result.artifact.sha256 == hashlib.sha256(data).hexdigest()


async def test_every_chunk_carries_the_xxh3_of_its_own_bytes(
    client: AsyncBlobstoreClient, transport: FaultyTransport, tmp_path: Path
) -> None:
    write_random(tmp_path / "a.bin", 2 * CHUNK + 1)

    await client.upload(tmp_path / "a.bin")

    puts = [s for s in transport.seen if s.method == "PUT"]
    assert len(puts) == 3
    assert all(s.headers.get("x-chunk-xxh3") == xxhash.xxh3_128_hexdigest(s.body) for s in puts)


async def test_bytes_upload_needs_a_name(client: AsyncBlobstoreClient) -> None:
    with pytest.raises(InvalidRequest):
        await client.upload(b"abc")


async def test_bytes_upload_reads_back_identical(client: AsyncBlobstoreClient, tmp_path: Path) -> None:
    data = os.urandom(5 * CHUNK + 7)

    result = await client.upload(data, name="x.bin", mime_type="application/x-test", metadata={"k": "v"})

    assert result.chunks_sent == 6
    assert result.artifact.mime_type == "application/x-test"
    assert result.artifact.metadata == {"k": "v"}
    assert await read_back(client, result.artifact.id, tmp_path) == data


async def test_async_iterator_of_unknown_length_is_cut_into_chunks(
    client: AsyncBlobstoreClient, transport: FaultyTransport, tmp_path: Path
) -> None:
    pieces = [os.urandom(n) for n in (1, 700, 3000, 5, 1024, 2048, 333)]
    data = b"".join(pieces)

    async def source() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield piece

    result = await client.upload(source(), name="stream.bin")

    assert result.artifact.size == len(data)
    assert result.artifact.sha256 == hashlib.sha256(data).hexdigest()
    assert sorted(transport.chunk_indexes_put()) == list(range(-(-len(data) // CHUNK)))
    assert await read_back(client, result.artifact.id, tmp_path) == data


async def test_progress_rises_to_the_total(client: AsyncBlobstoreClient, tmp_path: Path) -> None:
    write_random(tmp_path / "a.bin", 4 * CHUNK + 10)
    calls: list[tuple[int, int]] = []

    await client.upload(tmp_path / "a.bin", progress=lambda done, total: calls.append((done, total)))

    dones = [done for done, _ in calls]
    assert dones == sorted(dones)
    assert calls[-1] == (4 * CHUNK + 10, 4 * CHUNK + 10)


async def test_explicit_chunk_size_is_used(
    client: AsyncBlobstoreClient, transport: FaultyTransport, tmp_path: Path
) -> None:
    write_random(tmp_path / "a.bin", 1000)

    result = await client.upload(tmp_path / "a.bin", chunk_size=100)

    assert result.chunk_size == 100
    assert result.chunks_sent == 10


@pytest.mark.parametrize(
    ("kinds", "puts"),
    [(["refuse", "status"], 3), (["lose"], 2)],
    ids=["refused_connection_then_503", "response_lost"],
)
async def test_a_chunk_put_that_failed_is_resent_and_accepted(
    client: AsyncBlobstoreClient, transport: FaultyTransport, tmp_path: Path, kinds: list[str], puts: int
) -> None:
    data = write_random(tmp_path / "a.bin", 4 * CHUNK)
    for kind in kinds:
        transport.add(Fault(chunk_put(2), kind, headers={"retry-after": "0"}))

    result = await client.upload(tmp_path / "a.bin")

    assert transport.chunk_indexes_put().count(2) == puts
    assert await read_back(client, result.artifact.id, tmp_path) == data


async def test_429_is_retried(
    client: AsyncBlobstoreClient, transport: FaultyTransport, tmp_path: Path
) -> None:
    write_random(tmp_path / "a.bin", CHUNK)
    transport.add(Fault(path_is("POST", "/v1/uploads"), "status", status=429, headers={"retry-after": "0"}))

    await client.upload(tmp_path / "a.bin")

    assert transport.count(path_is("POST", "/v1/uploads")) == 2


async def test_4xx_is_not_retried(
    client: AsyncBlobstoreClient, transport: FaultyTransport, tmp_path: Path
) -> None:
    write_random(tmp_path / "a.bin", CHUNK)

    with pytest.raises(InvalidRequest):
        await client.upload(tmp_path / "a.bin", chunk_size=1)  # below the server's minimum

    assert transport.count(path_is("POST", "/v1/uploads")) == 1


async def test_exhausted_retries_report_the_server_unreachable(
    make_client: ClientFactory, transport: FaultyTransport, tmp_path: Path
) -> None:
    write_random(tmp_path / "a.bin", CHUNK)
    transport.add(Fault(chunk_put(0), "refuse", times=5))

    async with make_client(retry=RetryPolicy(attempts=2, base_delay=0, max_delay=0)) as client:
        with pytest.raises(ServerUnreachable) as caught:
            await client.upload(tmp_path / "a.bin")

    assert caught.value.code == "server_unreachable"
    assert "is unreachable" in caught.value.message
    assert transport.chunk_indexes_put() == [0, 0]


async def test_unknown_artifact_raises_not_found(client: AsyncBlobstoreClient) -> None:
    with pytest.raises(NotFound) as caught:
        await client.get_artifact("a_" + "x" * 24)

    assert caught.value.code == "not_found"

"""Resuming a file upload after a crash: only missing chunks are sent; stale state starts over."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from blobstore.auth import create_token
from blobstore.client import AsyncBlobstoreClient, RetryPolicy, UploadStateStore
from blobstore.client.state import FileIdentity
from blobstore.errors import ServerUnreachable
from blobstore.models import Scope
from blobstore.service import ArtifactService
from tests.client.conftest import CHUNK, ClientFactory, write_random
from tests.client.faults import Fault, FaultyTransport, chunk_put, path_is

NO_RETRY = RetryPolicy(attempts=1)
SIZE = 8 * CHUNK + 100
COUNT = 9


async def crash_midway(make_client: ClientFactory, transport: FaultyTransport, path: Path) -> str:
    """Upload until chunk 5 cannot be sent, as if the process died there; return the upload id."""
    transport.add(Fault(chunk_put(5), "refuse"))
    async with make_client(retry=NO_RETRY) as client:
        with pytest.raises(ServerUnreachable):
            await client.upload(path, parallel=1)
        status = await client.upload_status(first_upload_id(transport))
    assert status.chunks_received == frozenset(range(5))
    transport.seen.clear()
    return status.upload_id


def first_upload_id(transport: FaultyTransport) -> str:
    put = next(s for s in transport.seen if s.method == "PUT")
    return put.path.split("/")[3]


async def test_rerun_sends_only_the_chunks_the_server_lacks(
    make_client: ClientFactory, transport: FaultyTransport, state_store: UploadStateStore, tmp_path: Path
) -> None:
    data = write_random(tmp_path / "big.bin", SIZE)
    upload_id = await crash_midway(make_client, transport, tmp_path / "big.bin")
    progress: list[int] = []

    async with make_client() as client:
        result = await client.upload(
            tmp_path / "big.bin", progress=lambda done, _total: progress.append(done)
        )
        downloaded = (await client.download(result.artifact.id, tmp_path / "out")).path.read_bytes()

    assert result.resumed
    assert result.upload_id == upload_id
    assert sorted(transport.chunk_indexes_put()) == [5, 6, 7, 8]
    assert (result.chunks_skipped, result.chunks_sent) == (5, 4)
    assert progress[0] == 5 * CHUNK
    assert transport.count(path_is("POST", "/v1/uploads")) == 0
    # The first run hashed from its chunks and crashed before the end: the rerun hashed the whole file.
    (complete,) = [s for s in transport.seen if s.method == "POST" and s.path.endswith("/complete")]
    assert json.loads(complete.body)["sha256"] == hashlib.sha256(data).hexdigest()
    assert downloaded == data
    assert list(state_store.directory.iterdir()) == []


async def test_state_file_names_the_upload_and_holds_no_token(
    make_client: ClientFactory,
    transport: FaultyTransport,
    state_store: UploadStateStore,
    service: ArtifactService,
    tmp_path: Path,
) -> None:
    write_random(tmp_path / "big.bin", SIZE)
    issued = await create_token(
        service.repo, namespace="default", scopes=frozenset({Scope.READ, Scope.WRITE})
    )
    transport.add(Fault(chunk_put(1), "refuse"))

    async with make_client(retry=NO_RETRY, token=issued.token) as client:
        with pytest.raises(ServerUnreachable):
            await client.upload(tmp_path / "big.bin", parallel=1)

    (state_file,) = state_store.directory.iterdir()
    assert state_file.stat().st_mode & 0o777 == 0o600
    text = state_file.read_text()
    assert first_upload_id(transport) in text
    assert issued.token not in text
    secret = issued.token.removeprefix(f"bst_{issued.record.id}_")
    assert secret not in text


async def test_upload_gone_from_the_server_starts_over(
    make_client: ClientFactory, transport: FaultyTransport, tmp_path: Path
) -> None:
    data = write_random(tmp_path / "big.bin", SIZE)
    old_id = await crash_midway(make_client, transport, tmp_path / "big.bin")
    async with make_client() as client:
        await client.abort_upload(old_id)

        result = await client.upload(tmp_path / "big.bin")
        downloaded = (await client.download(result.artifact.id, tmp_path / "out")).path.read_bytes()

    assert not result.resumed
    assert result.upload_id != old_id
    assert sorted(transport.chunk_indexes_put()) == list(range(COUNT))
    assert downloaded == data


async def test_a_changed_file_does_not_resume_into_the_old_upload(
    make_client: ClientFactory, transport: FaultyTransport, tmp_path: Path
) -> None:
    path = tmp_path / "big.bin"
    write_random(path, SIZE)
    old_id = await crash_midway(make_client, transport, path)
    new_data = os.urandom(SIZE)
    path.write_bytes(new_data)
    os.utime(path, ns=(1, 1))

    async with make_client() as client:
        result = await client.upload(path)
        downloaded = (await client.download(result.artifact.id, tmp_path / "out")).path.read_bytes()

    assert result.upload_id != old_id
    assert downloaded == new_data


async def test_lost_completion_answer_is_recovered_on_rerun_with_the_same_artifact(
    make_client: ClientFactory, transport: FaultyTransport, state_store: UploadStateStore, tmp_path: Path
) -> None:
    write_random(tmp_path / "big.bin", SIZE)
    transport.add(Fault(path_is("POST", "/complete"), "lose"))
    async with make_client(retry=NO_RETRY) as client:
        with pytest.raises(ServerUnreachable):
            await client.upload(tmp_path / "big.bin")
        upload_id = first_upload_id(transport)
        assert (await client.upload_status(upload_id)).state == "completed"
    transport.seen.clear()

    async with make_client() as client:
        result = await client.upload(tmp_path / "big.bin")
        status = await client.upload_status(upload_id)

    assert result.upload_id == upload_id
    assert result.artifact.id == status.artifact_id
    assert transport.chunk_indexes_put() == []
    assert result.chunks_skipped == COUNT
    assert list(state_store.directory.iterdir()) == []


async def test_resume_disabled_keeps_no_state(
    client: AsyncBlobstoreClient, state_store: UploadStateStore, tmp_path: Path
) -> None:
    write_random(tmp_path / "a.bin", SIZE)

    await client.upload(tmp_path / "a.bin", resume=False)

    assert not state_store.directory.exists()


def test_torn_state_file_is_ignored(state_store: UploadStateStore, tmp_path: Path) -> None:
    path = tmp_path / "a.bin"
    write_random(path, 10)
    identity = FileIdentity.of("http://testserver", path)
    state_store.directory.mkdir(parents=True)
    state_store.path_for(identity).write_text('{"version": 1, "upload_')

    assert state_store.load(identity) is None


def test_state_is_keyed_by_server(state_store: UploadStateStore, tmp_path: Path) -> None:
    path = tmp_path / "a.bin"
    write_random(path, 10)

    assert FileIdentity.of("http://a", path).key != FileIdentity.of("http://b", path).key
    assert FileIdentity.of("http://a/", path).key == FileIdentity.of("http://a", path).key

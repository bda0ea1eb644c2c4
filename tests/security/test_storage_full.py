"""Disk full (ENOSPC) at write, fsync and publish, through the HTTP API over the local-disk backend: the
request fails with 507 ``storage_full``, nothing becomes visible, and the next upload succeeds."""

from __future__ import annotations

import errno
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

import blobstore.storage.dir_sync as dir_sync_backend
import blobstore.storage.local as local_backend
import blobstore.storage.local_files as local_files_backend
import blobstore.storage.local_inplace as inplace_backend
from blobstore.api import create_app
from blobstore.models import Caller
from blobstore.runtime import open_service
from blobstore.service import ArtifactService
from blobstore.storage.local_inplace import read_records
from tests.fixtures.asgi import app_client
from tests.fixtures.settings import make_settings
from tests.security.conftest import BASE, payload


class FaultyOs:
    """``os`` for the local backend only, with one call failing (ENOSPC by default) while ``armed``."""

    def __init__(self, failing: str, code: int = errno.ENOSPC) -> None:
        self.failing = failing
        self.code = code
        self.armed = True
        self.failures = 0

    def __getattr__(self, name: str) -> Any:
        real = getattr(os, name)
        if name != self.failing:
            return real

        def fail(*args: Any, **kwargs: Any) -> Any:
            if self.armed:
                self.failures += 1
                raise OSError(self.code, os.strerror(self.code))
            return real(*args, **kwargs)

        return fail


@dataclass(frozen=True)
class Disk:
    """The app over a local-disk store under ``root``, whose ``os`` calls a test can make fail."""

    http: httpx.AsyncClient
    service: ArtifactService
    root: Path
    monkeypatch: pytest.MonkeyPatch

    def arm(self, call: str, code: int = errno.ENOSPC) -> FaultyOs:
        """``call`` fails with ``code`` in every module of the local backend until the fault is disarmed."""
        faulty = FaultyOs(call, code)
        for backend in (local_backend, local_files_backend, inplace_backend, dir_sync_backend):
            self.monkeypatch.setattr(backend, "os", faulty)
        return faulty

    async def visible(self) -> tuple[int, int, list[str]]:
        """Blobs, artifacts and temporary files there are."""
        objects = [item async for item in self.service.blobs.iter_objects()]
        artifacts = await self.service.list_artifacts(Caller(namespace="default"))
        temp = sorted(p.name for p in (self.root / "tmp").iterdir())
        return len(objects), len(artifacts.items), temp


@pytest.fixture
async def disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Disk]:
    root = tmp_path / "blobs"
    # Chunks of several write batches are allowed, so that a chunk's writes run in a task of their own too.
    settings = make_settings(tmp_path, storage_url=root.as_uri(), max_chunk_size=2 * LARGE)
    async with open_service(settings) as service:
        app = create_app(settings, service=service)
        async with app_client(app, BASE) as http:
            yield Disk(http, service, root, monkeypatch)


FAULTS = ["write", "fsync", "link"]
CHUNK_FAULTS = ["pwrite", "fsync"]
"""A chunk is written in place at its offset and fsynced; nothing is linked."""
COMPLETION_FAULTS = ["fsync", "link", "rename"]
"""A completion writes no bytes: it renames the data file out of the writers' reach (``data`` → ``sealed``),
links it as the blob and fsyncs the directory."""
BEGIN_FAULTS = ["pwrite", "fsync", "rename"]
"""Beginning an upload writes its receipts header, fsyncs it and renames it into place."""
LARGE = 3 * 1024 * 1024
"""Bodies of several write batches: the writes run in a task of their own while the next batch arrives."""


@pytest.mark.parametrize("call", FAULTS)
async def test_a_single_request_upload_on_a_full_disk_is_507_and_leaves_nothing(
    disk: Disk, call: str
) -> None:
    http = disk.http
    faulty = disk.arm(call)
    data = payload("enospc-single")
    failed = await http.post("/v1/artifacts", params={"name": "full.bin"}, content=data)
    assert failed.status_code == 507, failed.text
    assert failed.json()["code"] == "storage_full"
    assert faulty.failures >= 1
    assert await disk.visible() == (0, 0, [])
    faulty.armed = False
    stored = await http.post("/v1/artifacts", params={"name": "after.bin"}, content=data)
    assert stored.status_code == 201
    assert (await http.get(f"/v1/artifacts/{stored.json()['id']}/content")).content == data


async def begin_two_chunk_upload(http: httpx.AsyncClient) -> str:
    begun = await http.post("/v1/uploads", json={"name": "c.bin", "size": 2048, "chunk_size": 1024})
    upload_id: str = begun.json()["upload_id"]
    return upload_id


async def put_both_chunks(http: httpx.AsyncClient, upload_id: str, data: bytes) -> None:
    for index in range(2):
        put = await http.put(
            f"/v1/uploads/{upload_id}/chunks/{index}", content=data[index * 1024 : (index + 1) * 1024]
        )
        assert put.status_code == 200


async def assert_completes_with(http: httpx.AsyncClient, upload_id: str, data: bytes) -> None:
    done = await http.post(f"/v1/uploads/{upload_id}/complete", json={})
    assert done.status_code == 201
    assert (await http.get(f"/v1/artifacts/{done.json()['id']}/content")).content == data


@pytest.mark.parametrize("call", CHUNK_FAULTS)
async def test_a_chunk_on_a_full_disk_is_507_and_is_not_recorded(disk: Disk, call: str) -> None:
    http = disk.http
    data = payload("enospc-chunk", 2048)[:2048]
    upload_id = await begin_two_chunk_upload(http)
    faulty = disk.arm(call)
    failed = await http.put(f"/v1/uploads/{upload_id}/chunks/0", content=data[:1024])
    assert (failed.status_code, failed.json()["code"]) == (507, "storage_full")
    status = await http.get(f"/v1/uploads/{upload_id}")
    assert status.json()["chunks_received"] == []
    assert read_records(disk.root / "staging" / upload_id) == {}
    faulty.armed = False
    await put_both_chunks(http, upload_id, data)
    await assert_completes_with(http, upload_id, data)


@pytest.mark.parametrize("call", COMPLETION_FAULTS)
async def test_a_completion_on_a_full_disk_is_507_and_the_upload_can_complete_later(
    disk: Disk, call: str
) -> None:
    http = disk.http
    data = payload("enospc-complete", 2048)[:2048]
    upload_id = await begin_two_chunk_upload(http)
    await put_both_chunks(http, upload_id, data)
    faulty = disk.arm(call)
    failed = await http.post(f"/v1/uploads/{upload_id}/complete", json={})
    assert (failed.status_code, failed.json()["code"]) == (507, "storage_full")
    assert await disk.visible() == (0, 0, [])
    assert (await http.get(f"/v1/uploads/{upload_id}")).json()["state"] == "open"
    faulty.armed = False
    await assert_completes_with(http, upload_id, data)


@pytest.mark.parametrize("call", FAULTS)
async def test_other_io_errors_are_503_and_leave_nothing(disk: Disk, call: str) -> None:
    http = disk.http
    faulty = disk.arm(call, errno.EIO)
    failed = await http.post("/v1/artifacts", params={"name": "eio.bin"}, content=b"bytes")
    assert (failed.status_code, failed.json()["code"]) == (503, "storage_unavailable")
    assert await disk.visible() == (0, 0, [])
    faulty.armed = False
    assert (await http.post("/v1/artifacts", params={"name": "ok.bin"}, content=b"bytes")).status_code == 201


async def pieces_of(data: bytes, size: int = 64 * 1024) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


@pytest.mark.parametrize("call", FAULTS)
async def test_a_large_upload_whose_background_write_hits_a_full_disk_is_507(disk: Disk, call: str) -> None:
    http = disk.http
    data = payload("enospc-large", LARGE)
    faulty = disk.arm(call)
    failed = await http.post("/v1/artifacts", params={"name": "large.bin"}, content=pieces_of(data))
    assert (failed.status_code, failed.json()["code"]) == (507, "storage_full"), failed.text
    assert faulty.failures >= 1
    assert await disk.visible() == (0, 0, [])
    faulty.armed = False
    stored = await http.post("/v1/artifacts", params={"name": "after.bin"}, content=pieces_of(data))
    assert stored.status_code == 201, stored.text


@pytest.mark.parametrize("call", CHUNK_FAULTS)
async def test_a_large_chunk_whose_background_write_hits_a_full_disk_is_507(disk: Disk, call: str) -> None:
    http = disk.http
    data = payload("enospc-large-chunk", LARGE)
    begun = await http.post("/v1/uploads", json={"name": "l.bin", "size": len(data), "chunk_size": len(data)})
    assert begun.status_code == 201, begun.text
    upload_id = begun.json()["upload_id"]
    faulty = disk.arm(call)
    failed = await http.put(f"/v1/uploads/{upload_id}/chunks/0", content=pieces_of(data))
    assert (failed.status_code, failed.json()["code"]) == (507, "storage_full"), failed.text
    assert read_records(disk.root / "staging" / upload_id) == {}
    faulty.armed = False
    put = await http.put(f"/v1/uploads/{upload_id}/chunks/0", content=pieces_of(data))
    assert put.status_code == 200, put.text
    await assert_completes_with(http, upload_id, data)


@pytest.mark.parametrize("call", BEGIN_FAULTS)
async def test_an_upload_begun_on_a_full_disk_is_507_and_the_next_one_begins(disk: Disk, call: str) -> None:
    http = disk.http
    faulty = disk.arm(call)
    failed = await http.post("/v1/uploads", json={"name": "b.bin", "size": 2048, "chunk_size": 1024})
    assert (failed.status_code, failed.json()["code"]) == (507, "storage_full"), failed.text
    assert faulty.failures >= 1
    faulty.armed = False
    data = payload("enospc-begin", 2048)[:2048]
    upload_id = await begin_two_chunk_upload(http)
    await put_both_chunks(http, upload_id, data)
    await assert_completes_with(http, upload_id, data)

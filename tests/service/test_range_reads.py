"""``ArtifactService.read_range``: the lookup, the caller's choice and the verified read of what it chose, on
every backend (one worker-thread call where the metadata and the store allow it, one step after the other
elsewhere)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import pytest

from blobstore.config import Settings
from blobstore.errors import Corruption, NotFound, RangeNotSatisfiable
from blobstore.models import Artifact, BlobInfo, Caller
from blobstore.nowait import WouldBlock
from blobstore.runtime import open_service
from blobstore.service import ArtifactService
from blobstore.storage import LocalBlobStore, MemoryBlobStore
from tests.fixtures.streams import chunks_of

BLOCK = 64 * 1024  # storage_chunk_size of the service fixture


async def test_the_chosen_span_is_read_with_the_artifact_and_the_plan(
    service: ArtifactService, caller: Caller
) -> None:
    data = os.urandom(3 * BLOCK + 7)
    stored = await service.create_artifact(caller, chunks_of(data), name="r.bin")
    seen: list[Artifact] = []

    def choose(artifact: Artifact) -> tuple[str, tuple[int, int] | None]:
        seen.append(artifact)
        return "the plan", (BLOCK - 10, 2 * BLOCK + 10)

    found = await service.read_range(caller, stored.id, choose)
    assert seen == [found.artifact]
    assert found.artifact.id == stored.id
    assert found.artifact.size == len(data)
    assert found.blob.sha256 == stored.sha256
    assert found.plan == "the plan"
    assert found.data == data[BLOCK - 10 : 2 * BLOCK + 10]


async def test_a_choice_of_no_span_reads_nothing(service: ArtifactService, caller: Caller) -> None:
    stored = await service.create_artifact(caller, chunks_of(b"abc"), name="n.bin")
    found = await service.read_range(caller, stored.id, lambda artifact: (artifact.size, None))
    assert found.plan == 3
    assert found.data is None


async def test_another_namespace_is_not_found_and_nothing_is_chosen(
    service: ArtifactService, caller: Caller, other: Caller
) -> None:
    stored = await service.create_artifact(caller, chunks_of(b"private"), name="p.bin")
    chosen: list[Artifact] = []

    def choose(artifact: Artifact) -> tuple[None, tuple[int, int] | None]:
        chosen.append(artifact)
        return None, (0, 1)

    with pytest.raises(NotFound):
        await service.read_range(other, stored.id, choose)
    await service.delete_artifact(caller, stored.id)
    with pytest.raises(NotFound):
        await service.read_range(caller, stored.id, choose)
    assert chosen == []


async def test_what_the_choice_raises_reaches_the_caller(service: ArtifactService, caller: Caller) -> None:
    stored = await service.create_artifact(caller, chunks_of(b"short"), name="s.bin")

    def choose(artifact: Artifact) -> tuple[None, tuple[int, int] | None]:
        raise RangeNotSatisfiable(size=artifact.size)

    with pytest.raises(RangeNotSatisfiable):
        await service.read_range(caller, stored.id, choose)


# Corrupting an object in place needs a backend the test can reach into; the storage contract tests corrupt
# S3 objects (tests/storage), and the read path above the store is the same on every backend.
@pytest.mark.parametrize("service", ["memory-sqlite", "local-sqlite"], indirect=True)
async def test_a_span_touching_a_corrupt_block_is_corruption_not_bytes(
    service: ArtifactService, caller: Caller
) -> None:
    data = os.urandom(2 * BLOCK)
    stored = await service.create_artifact(caller, chunks_of(data), name="c.bin")
    _, blob = await service.open_artifact(caller, stored.id)
    blobs = service.blobs
    if isinstance(blobs, MemoryBlobStore):
        blobs.flip_byte(blob.key, BLOCK + 1)
    elif isinstance(blobs, LocalBlobStore):
        with blobs.local_path(blob).open("r+b") as handle:
            handle.seek(BLOCK + 1)
            original = handle.read(1)[0]
            handle.seek(BLOCK + 1)
            handle.write(bytes([original ^ 0xFF]))
    else:
        raise AssertionError(f"no way to corrupt a block on {type(blobs).__name__}")
    with pytest.raises(Corruption):
        await service.read_range(caller, stored.id, lambda artifact: (None, (BLOCK - 4, BLOCK + 4)))
    sound = await service.read_range(caller, stored.id, lambda artifact: (None, (0, 100)))
    assert sound.data == data[:100]


# -- where the read runs: the event loop when nothing would wait, else a worker thread ---------------------


class ThreadLog:
    """The thread of each ``read_cached`` and ``read_blocking`` of a store (patched onto the instance)."""

    def __init__(self, service: ArtifactService, monkeypatch: pytest.MonkeyPatch) -> None:
        self.cached: list[int] = []
        self.blocking: list[int] = []
        blobs = service.blobs
        for name, log in (("read_cached", self.cached), ("read_blocking", self.blocking)):
            monkeypatch.setattr(blobs, name, _logged(getattr(blobs, name), log))


def _logged(
    read: Callable[[BlobInfo, int, int], bytes], log: list[int]
) -> Callable[[BlobInfo, int, int], bytes]:
    """``read``, noting in ``log`` the thread of each call."""

    def logged(blob: BlobInfo, offset: int, length: int) -> bytes:
        log.append(threading.get_ident())
        return read(blob, offset, length)

    return logged


def refuse(*args: object, **kwargs: object) -> NoReturn:
    raise WouldBlock


async def stored_and_logged(
    service: ArtifactService, caller: Caller, monkeypatch: pytest.MonkeyPatch, size: int
) -> tuple[bytes, str, ThreadLog]:
    """``size`` random bytes, the artifact of them, and the log of the threads its reads run on from now."""
    data = os.urandom(size)
    stored = await service.create_artifact(caller, chunks_of(data), name="logged.bin")
    return data, stored.id, ThreadLog(service, monkeypatch)


@pytest.mark.parametrize("service", ["memory-sqlite", "local-sqlite"], indirect=True)
async def test_a_span_in_memory_is_read_on_the_event_loop_without_a_worker_thread(
    service: ArtifactService, caller: Caller, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, artifact_id, log = await stored_and_logged(service, caller, monkeypatch, 2 * BLOCK)
    found = await service.read_range(caller, artifact_id, lambda artifact: (None, (BLOCK - 5, BLOCK + 5)))
    assert found.data == data[BLOCK - 5 : BLOCK + 5]
    assert log.cached == [threading.get_ident()]
    assert log.blocking == []


@pytest.mark.parametrize("service", ["memory-sqlite", "local-sqlite"], indirect=True)
async def test_a_span_that_would_wait_for_the_disk_is_read_again_on_a_worker_thread(
    service: ArtifactService, caller: Caller, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, artifact_id, log = await stored_and_logged(service, caller, monkeypatch, 2 * BLOCK)
    monkeypatch.setattr(service.blobs, "read_cached", refuse)
    chosen: list[Artifact] = []

    def choose(artifact: Artifact) -> tuple[None, tuple[int, int] | None]:
        chosen.append(artifact)
        return None, (10, BLOCK + 10)

    found = await service.read_range(caller, artifact_id, choose)
    assert found.data == data[10 : BLOCK + 10]
    assert len(log.blocking) == 1
    assert log.blocking[0] != threading.get_ident()
    assert len(chosen) == 2  # once on the event loop, once more on the thread


@pytest.mark.parametrize("service", ["local-sqlite"], indirect=True)
async def test_a_lookup_that_would_wait_for_a_lock_is_done_again_on_a_worker_thread(
    service: ArtifactService, caller: Caller, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, artifact_id, log = await stored_and_logged(service, caller, monkeypatch, 100)
    monkeypatch.setattr(service.repo, "get_artifact_with_blob_nowait", refuse)
    found = await service.read_range(caller, artifact_id, lambda artifact: (None, (0, 100)))
    assert found.data == data
    assert log.cached == []
    assert len(log.blocking) == 1
    assert log.blocking[0] != threading.get_ident()


async def test_inline_reads_off_sends_every_read_to_a_worker_thread(
    tmp_path: Path, caller: Caller, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = Settings(data_dir=tmp_path / "data", inline_reads=False)
    async with open_service(settings, migrate=True) as service:
        stored = await service.create_artifact(caller, chunks_of(b"cool"), name="c.bin")
        log = ThreadLog(service, monkeypatch)
        found = await service.read_range(caller, stored.id, lambda artifact: (None, (1, 3)))
        assert found.data == b"oo"
        assert log.cached == []
        assert len(log.blocking) == 1
        assert log.blocking[0] != threading.get_ident()

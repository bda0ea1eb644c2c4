"""Grouped directory fsyncs: nobody is answered before an fsync that started after their link."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import anyio
import pytest

from blobstore.digests import sha256_hex
from blobstore.errors import StorageUnavailable
from blobstore.storage import LocalBlobStore
from blobstore.storage.dir_sync import DirectorySync, fsync_dir
from tests.storage.conftest import chunks_of, keys_of, read_all

_WAIT = 30.0
"""A bound on waiting for other threads, so that a broken build fails instead of hanging."""


class RecordingFsync:
    """A directory fsync that records, for each call, the names the directory held when it started.

    The first fsync of ``hold`` waits until ``hold_until`` names are linked there, so every other writer links
    while that fsync runs: the case where answering after the running fsync would be wrong.
    """

    def __init__(self, hold: Path | None = None, hold_until: int = 0) -> None:
        self.hold = hold
        self.hold_until = hold_until
        self.lock = threading.Lock()
        self.finished: dict[Path, list[set[str]]] = {}
        self.calls: list[Path] = []

    def __call__(self, path: Path) -> None:
        covered = set(os.listdir(path))
        with self.lock:
            self.calls.append(path)
            first = path == self.hold and path not in self.finished
        if first:
            for _ in range(int(_WAIT * 100)):
                if len(os.listdir(path)) >= self.hold_until:
                    break
                threading.Event().wait(0.01)
        fsync_dir(path)
        with self.lock:
            self.finished.setdefault(path, []).append(covered)

    def durable(self, path: Path) -> set[str]:
        with self.lock:
            return set().union(*self.finished.get(path, []))


async def test_no_put_is_answered_before_a_directory_fsync_that_started_after_its_link(
    tmp_path: Path,
) -> None:
    data = b"same content, one fan-out directory" * 30
    digest = sha256_hex(data)
    root = tmp_path / "store"
    leaf = root / "blobs" / digest[:2] / digest[2:4]
    writers = 6
    fsync = RecordingFsync(hold=leaf, hold_until=writers)
    store = LocalBlobStore(root, io_threads=writers, directory_sync=DirectorySync(fsync))
    answered: list[tuple[str, set[str]]] = []

    async def put() -> None:
        blob = await store.put(chunks_of(data))
        # What the fsyncs finished so far made durable, taken the moment the answer arrives.
        answered.append((blob.key.rsplit("/", 1)[1], fsync.durable(leaf)))

    async with anyio.create_task_group() as tg:
        for _ in range(writers):
            tg.start_soon(put)
    assert len(answered) == writers
    for name, durable in answered:
        assert name in durable
    # The first fsync covered only its own writer; one more covered all the others.
    assert fsync.calls.count(leaf) < writers


def test_callers_arriving_during_an_fsync_share_the_next_one() -> None:
    started = threading.Event()
    release = threading.Event()
    calls: list[Path] = []

    def slow_first(path: Path) -> None:
        calls.append(path)
        if len(calls) == 1:
            started.set()
            release.wait(_WAIT)

    sync = DirectorySync(slow_first)
    path = Path("/nowhere")
    threads = [threading.Thread(target=sync.sync, args=(path,)) for _ in range(5)]
    threads[0].start()
    assert started.wait(_WAIT)
    for thread in threads[1:]:
        thread.start()
    for _ in range(int(_WAIT * 100)):
        if sync.waiting(path) == 4:
            break
        threading.Event().wait(0.01)
    assert sync.waiting(path) == 4
    release.set()
    for thread in threads:
        thread.join(_WAIT)
    assert calls == [path, path]
    assert sync.waiting(path) == 0


def test_a_failed_fsync_fails_its_whole_round_and_the_next_caller_gets_a_new_one() -> None:
    started = threading.Event()
    release = threading.Event()
    calls: list[Path] = []

    def fail_second(path: Path) -> None:
        calls.append(path)
        if len(calls) == 1:
            started.set()
            release.wait(_WAIT)
        elif len(calls) == 2:
            raise OSError(errno.EIO, "injected I/O error")

    sync = DirectorySync(fail_second)
    path = Path("/nowhere")
    errors: list[BaseException | None] = []

    def call() -> None:
        try:
            sync.sync(path)
        except OSError as exc:
            errors.append(exc)
        else:
            errors.append(None)

    first = threading.Thread(target=call)
    first.start()
    assert started.wait(_WAIT)
    others = [threading.Thread(target=call) for _ in range(3)]
    for thread in others:
        thread.start()
    for _ in range(int(_WAIT * 100)):
        if sync.waiting(path) == 3:
            break
        threading.Event().wait(0.01)
    release.set()
    for thread in [first, *others]:
        thread.join(_WAIT)
    assert errors.count(None) == 1
    failed = [exc for exc in errors if exc is not None]
    assert len(failed) == 3
    assert all(isinstance(exc, OSError) and exc.errno == errno.EIO for exc in failed)
    assert len({id(exc) for exc in failed}) == 3  # each caller its own exception
    sync.sync(path)  # a new round, a new fsync
    assert len(calls) == 3


async def test_a_failed_grouped_fsync_unpublishes_every_put_of_its_round(tmp_path: Path) -> None:
    data = b"x" * 3000
    digest = sha256_hex(data)
    root = tmp_path / "store"
    leaf = root / "blobs" / digest[:2] / digest[2:4]
    seen: list[Path] = []

    def failing(path: Path) -> None:
        seen.append(path)
        if path == leaf:
            raise OSError(errno.EIO, "injected I/O error")
        fsync_dir(path)

    store = LocalBlobStore(root, io_threads=4, directory_sync=DirectorySync(failing))
    outcomes: list[str] = []

    async def put() -> None:
        try:
            await store.put(chunks_of(data))
        except StorageUnavailable:
            outcomes.append("failed")

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(put)
    assert outcomes == ["failed"] * 4
    assert await keys_of(store) == set()
    assert sorted((root / "tmp").iterdir()) == []


async def test_a_data_directory_without_the_fan_out_directories_keeps_working(tmp_path: Path) -> None:
    root = tmp_path / "store"
    old = await LocalBlobStore(root).put(chunks_of(b"written before the fan-out existed"))
    kept = (root / old.key).parent.parent.name
    for first in (root / "blobs").iterdir():
        if first.name != kept:
            first.rmdir()  # as a data directory from before: only the directories in use
    store = LocalBlobStore(root)
    assert len(list((root / "blobs").iterdir())) == 256
    assert await read_all(store, old) == b"written before the fan-out existed"
    new = await store.put(chunks_of(b"written after"))
    assert await read_all(store, new) == b"written after"
    assert await keys_of(store) == {old.key, new.key}


async def test_a_fan_out_directory_removed_behind_the_store_is_created_again(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = LocalBlobStore(root)
    first = await store.put(chunks_of(b"content"))
    await store.delete(first.key)
    (root / first.key).parent.rmdir()
    second = await store.put(chunks_of(b"content"))
    assert await read_all(store, second) == b"content"


async def test_a_small_put_is_one_worker_thread_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = LocalBlobStore(tmp_path / "store")
    await store.put(chunks_of(b"warm the fan-out directory"))
    calls: list[str] = []
    run = store._run

    async def counting(func: object, *args: object) -> object:
        calls.append(getattr(func, "__name__", "?"))
        return await run(func, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "_run", counting)
    blob = await store.put(chunks_of(b"a" * 1024))
    assert calls == ["_write_and_publish"]
    assert await read_all(store, blob) == b"a" * 1024

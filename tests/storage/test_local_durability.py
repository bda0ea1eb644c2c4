"""Local-disk durability: private modes, crash leftovers, failed fsync and full disks."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

import blobstore
from blobstore.errors import NotFound, StorageFull, StorageUnavailable
from blobstore.storage import LocalBlobStore, SupportsLocalPath
from blobstore.storage.local_inplace import read_records
from tests.storage.conftest import chunks_of, keys_of, read_all

MiB = 1024 * 1024


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def leftovers(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "tmp").iterdir())


@pytest.fixture
def open_umask() -> Iterator[None]:
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


@pytest.mark.usefixtures("open_umask")
async def test_files_are_0600_and_directories_0700_whatever_the_umask(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = LocalBlobStore(root)
    blob = await store.put(chunks_of(b"private bytes"))
    ref = await store.stage_begin("u_modes", chunk_size=100)
    await store.stage_put(ref, 0, chunks_of(b"chunk"))
    published = root / blob.key
    directories = [root, root / "blobs", published.parent.parent, published.parent, root / "tmp"]
    directories += [root / "staging", root / "staging" / ref]
    assert {str(d.relative_to(tmp_path)): mode(d) for d in directories} == {
        str(d.relative_to(tmp_path)): 0o700 for d in directories
    }
    assert mode(published) == 0o600
    assert {name: mode(root / "staging" / ref / name) for name in ("receipts", "data")} == {
        "receipts": 0o600,
        "data": 0o600,
    }


async def test_existing_root_is_made_private(tmp_path: Path) -> None:
    root = tmp_path / "store"
    root.mkdir(mode=0o755)
    root.chmod(0o755)
    LocalBlobStore(root)
    assert mode(root) == 0o700


async def test_published_blob_is_a_plain_local_file(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path / "store")
    blob = await store.put(chunks_of(b"zero copy"))
    assert isinstance(store, SupportsLocalPath)
    assert store.local_path(blob).read_bytes() == b"zero copy"
    assert leftovers(tmp_path / "store") == []


CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from blobstore.storage.local import LocalBlobStore

    async def slow():
        yield b"x" * (2 * 1024 * 1024)
        # Asked for more: the first batch is being written to the temp file meanwhile.
        print("received", flush=True)
        # The behaviour under test: the writer stalls mid-blob until the test kills its process.
        await asyncio.sleep(3600)
        yield b"never"

    async def main():
        await LocalBlobStore(Path(sys.argv[1])).put(slow())

    asyncio.run(main())
    """
)


def wait_for(condition: Callable[[], bool], seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_put_killed_midway_publishes_nothing_and_its_temp_file_is_swept(tmp_path: Path) -> None:
    root = tmp_path / "store"
    # The child imports the same blobstore as this process, wherever the tree is checked out.
    source_root = str(Path(blobstore.__file__).resolve().parents[1])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [source_root, os.environ.get("PYTHONPATH")])),
    }
    command = [sys.executable, "-c", CHILD, str(root)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env) as child:
        try:
            assert child.stdout is not None
            assert child.stdout.readline() == "received\n"
            assert wait_for(lambda: [t.stat().st_size for t in (root / "tmp").iterdir()] == [2 * MiB])
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
    assert child.returncode == -signal.SIGKILL

    async def inspect_and_sweep() -> tuple[set[str], int, int]:
        store = LocalBlobStore(root)
        published = await keys_of(store)
        kept = await store.sweep_temp(datetime.now(UTC) - timedelta(hours=1))
        swept = await store.sweep_temp(datetime.now(UTC) + timedelta(minutes=1))
        return published, kept, swept

    assert anyio.run(inspect_and_sweep) == (set(), 0, 1)
    assert leftovers(root) == []


class FailingFsync:
    """``os.fsync`` that fails with ``EIO`` on the calls listed, counting every call."""

    def __init__(self, fail_on: set[int]) -> None:
        self.calls = 0
        self.fail_on = fail_on
        self.real = os.fsync

    def __call__(self, fd: int) -> None:
        self.calls += 1
        if self.calls in self.fail_on:
            raise OSError(errno.EIO, "injected I/O error")
        self.real(fd)


async def test_failed_fsync_fails_the_put_without_retry_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalBlobStore(tmp_path / "store")
    fsync = FailingFsync(fail_on={1})
    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(StorageUnavailable) as caught:
        await store.put(chunks_of(b"a" * 100_000))
    assert fsync.calls == 1
    # The cause keeps the errno for operators but not the path, which names the content's digest.
    assert isinstance(caught.value.__cause__, OSError)
    assert caught.value.__cause__.errno == errno.EIO
    assert caught.value.__cause__.filename is None
    assert await keys_of(store) == set()
    assert leftovers(tmp_path / "store") == []


async def test_failed_directory_fsync_unpublishes_the_blob(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalBlobStore(tmp_path / "store")
    earlier = await store.put(chunks_of(b"b" * 1000))  # creates the fan-out directories
    fsync = FailingFsync(fail_on={2})  # 1: the temp file, 2: the directory after the link
    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(StorageUnavailable):
        await store.put(chunks_of(b"b" * 1000))
    assert fsync.calls == 2
    monkeypatch.undo()
    assert await keys_of(store) == {earlier.key}
    assert leftovers(tmp_path / "store") == []


async def test_failed_fsync_of_a_staged_chunk_keeps_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalBlobStore(tmp_path / "store")
    ref = await store.stage_begin("u_fsync", chunk_size=1000)
    fsync = FailingFsync(fail_on={1})
    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(StorageUnavailable):
        await store.stage_put(ref, 0, chunks_of(b"c" * 1000))
    assert fsync.calls == 1
    assert read_records(tmp_path / "store" / "staging" / ref) == {}
    assert leftovers(tmp_path / "store") == []
    monkeypatch.undo()
    # Nothing was accepted, so other bytes for the same index are not a conflict.
    receipt = await store.stage_put(ref, 0, chunks_of(b"C" * 1000))
    assert await read_all(store, await store.stage_commit(ref, [receipt])) == b"C" * 1000


def full_disk_for(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``os.write`` and ``os.pwrite`` fail with ENOSPC for files under ``root`` only."""
    real_write, real_pwrite = os.write, os.pwrite

    def refuse_under_root(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").startswith(str(root)):
            raise OSError(errno.ENOSPC, "No space left on device")

    def write(fd: int, data: Any) -> int:
        refuse_under_root(fd)
        return real_write(fd, data)

    def pwrite(fd: int, data: Any, offset: int) -> int:
        refuse_under_root(fd)
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(os, "write", write)
    monkeypatch.setattr(os, "pwrite", pwrite)


async def test_full_disk_is_storage_full_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "store"
    store = LocalBlobStore(root)
    ref = await store.stage_begin("u_full", chunk_size=1000)
    full_disk_for(root, monkeypatch)
    with pytest.raises(StorageFull):
        await store.put(chunks_of(b"d" * 300_000))
    with pytest.raises(StorageFull):
        await store.stage_put(ref, 0, chunks_of(b"e" * 1000))
    monkeypatch.undo()
    assert await keys_of(store) == set()
    assert leftovers(root) == []
    assert read_records(root / "staging" / ref) == {}


def refuse_link(source: Any, target: Any) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


async def test_full_disk_during_commit_keeps_the_staged_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "store"
    store = LocalBlobStore(root)
    ref = await store.stage_begin("u_commit_full", chunk_size=1000)
    receipt = await store.stage_put(ref, 0, chunks_of(b"f" * 1000))
    # A completion writes no bytes (the staged file is linked as it lies): its link meets the full disk.
    monkeypatch.setattr(os, "link", refuse_link)
    with pytest.raises(StorageFull):
        await store.stage_commit(ref, [receipt])
    monkeypatch.undo()
    assert await keys_of(store) == set()
    assert leftovers(root) == []
    blob = await store.stage_commit(ref, [receipt])
    assert await read_all(store, blob) == b"f" * 1000


async def test_chunk_for_an_aborted_upload_is_not_found(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path / "store")
    ref = await store.stage_begin("u_gone", chunk_size=10)
    await store.stage_abort(ref)
    with pytest.raises(NotFound):
        await store.stage_put(ref, 0, chunks_of(b"late"))
    assert leftovers(tmp_path / "store") == []


async def test_truncated_blob_file_is_corruption_not_short_data(tmp_path: Path) -> None:
    from blobstore.errors import Corruption

    store = LocalBlobStore(tmp_path / "store", block_size=1000)
    blob = await store.put(chunks_of(b"g" * 2500))
    os.truncate(store.local_path(blob), 2100)
    assert await read_all(store, blob, 0, 2000) == b"g" * 2000
    with pytest.raises(Corruption):
        await read_all(store, blob, 2000)


async def test_unwritable_root_fails_the_readiness_check(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path / "store")
    await store.check()
    for name in ("tmp", "staging", "blobs"):
        shutil.rmtree(tmp_path / "store" / name)  # blobs/ holds the pre-created fan-out directories
    with pytest.raises(StorageUnavailable):
        await store.check()

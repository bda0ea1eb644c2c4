"""The disk reserve on a real small file system (a 4 MiB tmpfs): allocated as far as there is room, released
whole, and restored by a process that does not own it only as far as it released it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from blobstore.diskspace import MIN_FREE_BYTES, RESERVE_FILE_NAME, SpaceReserve, free_bytes
from tests.fixtures.smallfs import fill, small_tmpfs

MiB = 1024 * 1024


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path / "fs", 4 * MiB) as target:
        yield target


def test_the_owner_allocates_the_reserve_and_a_release_hands_it_back(small_fs: Path) -> None:
    reserve = SpaceReserve(small_fs / RESERVE_FILE_NAME, MiB, owner=True)
    before = free_bytes(small_fs)
    assert reserve.ensure()
    assert (small_fs / RESERVE_FILE_NAME).stat().st_size == MiB
    assert free_bytes(small_fs) == before - MiB
    assert reserve.release() == MiB
    assert free_bytes(small_fs) == before
    assert reserve.release() == 0


def test_on_a_full_file_system_the_reserve_takes_what_there_is_and_says_so(small_fs: Path) -> None:
    (small_fs / "filler").write_bytes(b"\0" * (3 * MiB + MiB // 2))
    reserve = SpaceReserve(small_fs / RESERVE_FILE_NAME, MiB, owner=True)
    assert not reserve.ensure()
    assert free_bytes(small_fs) < MIN_FREE_BYTES
    os.unlink(small_fs / "filler")
    assert reserve.ensure()
    assert (small_fs / RESERVE_FILE_NAME).stat().st_size == MiB


def test_another_process_restores_only_what_it_released_and_never_creates_one(small_fs: Path) -> None:
    path = small_fs / RESERVE_FILE_NAME
    admin = SpaceReserve(path, 2 * MiB, owner=False)
    assert admin.ensure()
    assert not path.exists()
    SpaceReserve(path, MiB // 2, owner=True).ensure()
    assert admin.release() == MiB // 2
    assert admin.ensure()
    assert path.stat().st_size == MiB // 2


def test_release_if_full_leaves_a_reserve_alone_while_there_is_room(small_fs: Path) -> None:
    reserve = SpaceReserve(small_fs / RESERVE_FILE_NAME, MiB, owner=True)
    reserve.ensure()
    assert reserve.release_if_full() == 0
    (small_fs / "filler").write_bytes(b"\0" * (free_bytes(small_fs) - MIN_FREE_BYTES // 2))
    assert reserve.release_if_full() == MiB


def test_an_audit_line_on_a_full_disk_gets_through_on_the_reserve(small_fs: Path) -> None:
    from blobstore.audit import AuditLog
    from blobstore.errors import StorageFull

    reserve = SpaceReserve(small_fs / RESERVE_FILE_NAME, MiB, owner=True)
    assert reserve.ensure()
    fill(small_fs / "filler")
    line: dict[str, Any] = {"actor": "local", "namespace": "default", "action": "delete", "result": "ok"}
    with pytest.raises(StorageFull):
        AuditLog(small_fs / "audit.jsonl").record(**line)
    AuditLog(small_fs / "audit.jsonl", on_full=reserve.release).record(**line)
    assert b'"action":"delete"' in (small_fs / "audit.jsonl").read_bytes()
    assert (small_fs / RESERVE_FILE_NAME).stat().st_size == 0

"""A blob's writeback starts while it is written (``blobstore/storage/writeback.py``): every few MiB of a
temp file, the range written since the last start, through the real ``sync_file_range``; what is stored is
the same bytes, and a file the hint does not apply to changes nothing."""

from __future__ import annotations

import hashlib
import itertools
import os
import sys
from pathlib import Path

import pytest

from blobstore.storage import writeback
from blobstore.storage.local_files import TempFile

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="sync_file_range is Linux's")


def test_the_kernel_takes_the_hint_for_a_file_and_not_for_a_pipe(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    path.write_bytes(os.urandom(1 << 20))
    fd = os.open(path, os.O_RDWR)
    try:
        assert writeback.start_writeback(fd, 0, 1 << 20) is True
    finally:
        os.close(fd)
    assert writeback.start_writeback(fd, 0, 0) is False  # nothing to write: no call


def test_a_refused_hint_is_not_tried_again_and_raises_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writeback, "_refused", [])
    read, write = os.pipe()
    try:
        assert writeback.start_writeback(write, 0, 4096) is False  # ESPIPE
        assert writeback._refused == [True]
    finally:
        os.close(read)
        os.close(write)


def test_a_temp_file_starts_writeback_of_each_step_it_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[tuple[int, int]] = []
    real = writeback.start_writeback

    def recording(fd: int, offset: int, length: int) -> bool:
        started.append((offset, length))
        return real(fd, offset, length)

    monkeypatch.setattr(writeback, "start_writeback", recording)
    data = os.urandom(3 * writeback.STEP + 12345)
    temp = TempFile(tmp_path)
    try:
        for at in range(0, len(data), 1 << 20):
            temp.append(data[at : at + (1 << 20)])
        os.fsync(temp.fileno())
        assert hashlib.sha256(temp.path.read_bytes()).digest() == hashlib.sha256(data).digest()
    finally:
        temp.discard()
    # Consecutive ranges from the start, each at least a step, none past what was written.
    assert len(started) == 3
    assert started[0][0] == 0
    for (offset, length), (following, _) in itertools.pairwise(started):
        assert offset + length == following
    assert all(length >= writeback.STEP for _, length in started)
    assert started[-1][0] + started[-1][1] <= len(data)

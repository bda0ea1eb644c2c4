"""The data-directory lock: one server per data directory, released on exit or death."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from blobstore.datadir import LOCK_FILE_NAME, AlreadyRunning, DataDirLock

TRY_LOCK = textwrap.dedent(
    """
    import sys
    from blobstore.datadir import AlreadyRunning, DataDirLock
    try:
        with DataDirLock(sys.argv[1]):
            print("acquired")
    except AlreadyRunning as exc:
        print(f"busy {exc.pid}|{exc}")
    """
)


def try_lock_in_subprocess(data_dir: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", TRY_LOCK, str(data_dir)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return done.stdout.strip()


def test_second_server_on_the_same_data_dir_fails_naming_dir_and_pid(tmp_path: Path) -> None:
    with DataDirLock(tmp_path):
        outcome = try_lock_in_subprocess(tmp_path)

    assert outcome.startswith(f"busy {os.getpid()}|")
    assert str(tmp_path) in outcome
    assert str(os.getpid()) in outcome.split("|", 1)[1]


def test_lock_is_free_again_after_release(tmp_path: Path) -> None:
    with DataDirLock(tmp_path):
        pass

    assert try_lock_in_subprocess(tmp_path) == "acquired"


def test_lock_is_released_when_the_holder_dies(tmp_path: Path) -> None:
    with subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from blobstore.datadir import DataDirLock; "
            "DataDirLock(sys.argv[1]).acquire(); print('held', flush=True); sys.stdin.read()",
            str(tmp_path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        try:
            assert holder.stdout is not None
            assert holder.stdout.readline().strip() == "held"
            with pytest.raises(AlreadyRunning) as busy:
                DataDirLock(tmp_path).acquire()
            assert busy.value.pid == holder.pid
        finally:
            holder.kill()

    with DataDirLock(tmp_path) as lock:
        assert lock.held


def test_second_lock_in_the_same_process_also_fails(tmp_path: Path) -> None:
    with DataDirLock(tmp_path), pytest.raises(AlreadyRunning):
        DataDirLock(tmp_path).acquire()


def test_lock_file_records_the_pid_and_is_private(tmp_path: Path) -> None:
    path = tmp_path / LOCK_FILE_NAME
    with DataDirLock(tmp_path):
        assert path.read_text().strip() == str(os.getpid())
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text() == ""


def test_lock_is_released_when_the_block_raises(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="boom"), DataDirLock(tmp_path):
        raise RuntimeError("boom")

    assert try_lock_in_subprocess(tmp_path) == "acquired"

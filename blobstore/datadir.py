"""The data-directory lock: one server process per SQLite data directory.

SQLite in WAL mode works only between processes on one host, and two servers sharing a data directory would
each believe they own its cleanup. The running server holds an exclusive ``flock`` on
``<data_dir>/server.lock``; a second server fails at once with :class:`AlreadyRunning`. Admin commands
(``migrate``, ``cleanup``, ``verify``, ``token``) do not take the lock and run beside the server. The kernel
drops an ``flock`` when its holder dies, so a crash never leaves a stale lock behind; the pid in the file is
only there to name the holder.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path
from types import TracebackType

LOCK_FILE_NAME = "server.lock"


class AlreadyRunning(RuntimeError):
    """Another server process holds the lock on this data directory."""

    def __init__(self, data_dir: Path, pid: int | None) -> None:
        self.data_dir = data_dir
        self.pid = pid
        holder = f"process {pid}" if pid is not None else "another process"
        super().__init__(
            f"another blobstore server ({holder}) is already using the data directory {data_dir}"
        )


class DataDirLock:
    """Exclusive, non-blocking lock on ``<data_dir>/server.lock``; use as a context manager."""

    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        self.data_dir = Path(data_dir)
        self.path = self.data_dir / LOCK_FILE_NAME
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        if self._fd is not None:
            raise RuntimeError("DataDirLock is already held by this object")
        # No O_TRUNC: truncating before holding the lock would wipe the running holder's pid.
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                pid = _read_pid(fd)
            finally:
                os.close(fd)
            raise AlreadyRunning(self.data_dir, pid) from None
        except BaseException:
            os.close(fd)
            raise
        try:
            os.ftruncate(fd, 0)
            _write_pid(fd)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            # Empty the file while still holding the lock so a later reader never names a dead pid.
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)

    def __enter__(self) -> DataDirLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def _write_pid(fd: int) -> None:
    """Name the holder in the file. On a full disk the file stays empty: the lock is what counts, and a
    server must still start there to serve reads and let an operator free space."""
    try:
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        os.ftruncate(fd, 0)


def _read_pid(fd: int) -> int | None:
    text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    # Empty while the holder is between open and write; then there is no pid to name yet.
    return int(text) if text.isdigit() else None

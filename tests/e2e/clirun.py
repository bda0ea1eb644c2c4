"""Running the ``blobstore`` command under a pseudo-terminal."""

from __future__ import annotations

import os
import pty
import subprocess
import threading
from pathlib import Path

from tests.fixtures.server import BLOBSTORE


class PtyProcess:
    """The CLI with stdout and stderr on a pseudo-terminal; a thread drains it so the child never blocks."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path | None = None) -> None:
        master, slave = pty.openpty()
        self.process = subprocess.Popen(
            [str(BLOBSTORE), *args], stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env, cwd=cwd
        )
        os.close(slave)
        self._master = master
        self._output = bytearray()
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        while True:
            try:
                block = os.read(self._master, 65536)
            except OSError:  # EIO: the child closed its side
                break
            if not block:
                break
            with self._lock:
                self._output += block

    @property
    def output(self) -> str:
        with self._lock:
            return self._output.decode("utf-8", "replace")

    def wait(self, timeout: float = 300) -> int:
        code = self.process.wait(timeout)
        self._reader.join(timeout)
        os.close(self._master)
        return code

"""``python wire_meter.py LOG COMMAND...``: run COMMAND on this process's stdio and log each line's size.

It stands between an MCP client and the server it starts, copying newline-delimited messages both ways
unchanged; LOG gets one line per message, ``> N`` for N bytes the client sent and ``< N`` for N bytes it
received, written as they pass, so a test can check the largest message of either direction.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import IO


def pump(source: IO[bytes], sink: IO[bytes], log: IO[str], mark: str, lock: threading.Lock) -> None:
    for line in iter(source.readline, b""):
        size = len(line.rstrip(b"\r\n"))
        with lock:
            log.write(f"{mark} {size}\n")
            log.flush()
        sink.write(line)
        sink.flush()
    sink.close()


def main(log_path: str, command: list[str]) -> int:
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None
    assert child.stdout is not None
    lock = threading.Lock()
    with open(log_path, "a") as log:
        sent = threading.Thread(
            target=pump, args=(sys.stdin.buffer, child.stdin, log, ">", lock), daemon=True
        )
        received = threading.Thread(target=pump, args=(child.stdout, sys.stdout.buffer, log, "<", lock))
        sent.start()
        received.start()
        received.join()
    return child.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))

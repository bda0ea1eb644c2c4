"""The allocator settings of ``blobstore mcp``: large short-lived buffers reuse freed memory."""

from __future__ import annotations

import subprocess
import sys

import pytest

from blobstore import allocator

# Window-sized buffers, as a 1 MiB MCP window makes them: two blocks, the window, its base64 text and bytes.
PROGRAM = """
import base64, resource, sys, threading
from blobstore.allocator import keep_freed_memory

if sys.argv[1] == "keep":
    assert keep_freed_memory()

def window():
    blocks = [bytes(bytearray(b"x" * (1 << 20))) for _ in range(2)]
    data = b"".join(block[12345:] for block in blocks)
    return len(base64.b64encode(data).decode().encode())

def rounds(count):
    for _ in range(count):
        window()

def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

rounds(5)
before = faults()
rounds(20)
main = (faults() - before) / 20
worker = threading.Thread(target=rounds, args=(5,))
worker.start()
worker.join()
before = faults()
worker = threading.Thread(target=rounds, args=(20,))
worker.start()
worker.join()
print(main, (faults() - before) / 20)
"""


def faults_per_round(mode: str) -> tuple[float, float]:
    out = subprocess.run([sys.executable, "-c", PROGRAM, mode], capture_output=True, text=True, check=True)
    main, worker = out.stdout.split()
    return float(main), float(worker)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_kept_memory_serves_the_next_large_buffers_without_fresh_pages() -> None:
    main, worker = faults_per_round("keep")

    # A thread's start alone costs some faults (its stack); about 3,500 per round with the defaults.
    assert main < 50
    assert worker < 200


def test_keep_freed_memory_sets_nothing_off_linux(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")

    assert allocator.keep_freed_memory() is False

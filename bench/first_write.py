"""What the page cache costs this machine: a new file written twice in a row, and the CPU each write took.

Every upload, ours or a peer's, copies its bytes into the page cache. On the 2-vCPU VM the suite runs on, a
page the guest has not touched since the host last took it back costs several times a touched one, and the
host takes freed memory back within minutes; so the same upload's CPU swings with what the kernel happens to
hand out (docs/performance.md, "What this machine does to the figures"). This writes ``--mib`` MiB of random
bytes into a new file in 8 MiB ``pwrite`` calls, fsyncs and removes it, then does the same again at once,
and prints the wall and CPU seconds of both: the second write mostly gets the pages the first freed::

    .venv/bin/python bench/first_write.py              # 1 GiB, twice
    .venv/bin/python bench/first_write.py --mib 4096 --dir /var/tmp
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path

PIECE = 8 * 1024 * 1024


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def write_once(directory: Path, mib: int, piece: bytes) -> tuple[float, float]:
    """(wall, CPU) seconds of writing ``mib`` MiB into a new file and fsyncing it; the file is removed."""
    fd, name = tempfile.mkstemp(dir=directory, prefix="first-write-")
    try:
        started, cpu = time.perf_counter(), cpu_seconds()
        for index in range(mib * 1024 * 1024 // PIECE):
            os.pwrite(fd, piece, index * PIECE)
        os.fsync(fd)
        return time.perf_counter() - started, cpu_seconds() - cpu
    finally:
        os.close(fd)
        os.unlink(name)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mib", type=int, default=1024, help="size of the file, a multiple of 8")
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()), help="where to write it")
    args = parser.parse_args()
    if args.mib <= 0 or args.mib % 8:
        parser.error("--mib must be a positive multiple of 8")
    piece = os.urandom(PIECE)
    for label in ("first", "second"):
        wall, cpu = write_once(args.dir, args.mib, piece)
        per_gib = cpu * 1024 / args.mib
        print(
            f"{label} write of {args.mib} MiB: wall {wall:.2f} s, CPU {cpu:.2f} s ({per_gib:.2f} s per GiB)"
        )


if __name__ == "__main__":
    main()

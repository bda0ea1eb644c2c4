"""One decoder job in a process of its own: ``python -m blobstore.views.worker MEMORY_BYTES``.

The job comes on standard input as one JSON object (``op``, ``args``). The answer goes to standard output
as one JSON header line (``ok``, ``meta`` and the parts' facts and lengths, or ``code`` and ``message``)
followed by the parts' bytes. A job whose caller listens to its progress (``progress`` true in the job) may
write progress lines before the header (:func:`blobstore.views.progress.step`), at most four a second. A
native decoder that loops or balloons is bounded from outside: the address-space limit set here turns
runaway allocation into ``view_too_large``, and the parent kills the process past its time (or when the
call waiting for it is cancelled).
"""

from __future__ import annotations

import json
import resource
import sys
from typing import TYPE_CHECKING, Any, BinaryIO

from blobstore.errors import BlobstoreError, MediaInvalid, ViewTooLarge
from blobstore.views import progress

if TYPE_CHECKING:
    from blobstore.views.kind import Job


def _answer(out: BinaryIO, header: dict[str, Any], parts: list[bytes]) -> None:
    out.write(json.dumps(header, separators=(",", ":")).encode() + b"\n")
    for part in parts:
        out.write(part)
    out.flush()


def _progress_writer(out: BinaryIO) -> progress.Step:
    throttle = progress.Throttle(after=0.0)

    def write(done: float, total: float | None, message: str | None) -> None:
        if throttle.passes(done, total):
            out.write(progress.progress_line(done, total, message))
            out.flush()

    return write


def run_job(job: dict[str, Any], out: BinaryIO | None = None) -> tuple[dict[str, Any], list[bytes]]:
    """The header and parts for one job; every failure is a catalogue code (never a traceback). Its progress
    lines go to ``out`` when the job asks for them."""
    from blobstore.views.jobs import OPERATIONS

    operation: Job | None = OPERATIONS.get(str(job.get("op")))
    if operation is None:
        return {"ok": False, "code": "internal", "message": "unknown view operation"}, []
    step = _progress_writer(out) if out is not None and job.get("progress") else None
    try:
        with progress.stepping(step):
            decoded = operation(**job.get("args", {}))
    except BlobstoreError as exc:
        return {"ok": False, "code": exc.code, "message": exc.message}, []
    except MemoryError:
        too_large = ViewTooLarge("decoding needs more memory than a view worker may use")
        return {"ok": False, "code": too_large.code, "message": too_large.message}, []
    except Exception:  # a decoder's own failure on these bytes, whatever the library calls it
        invalid = MediaInvalid()
        return {"ok": False, "code": invalid.code, "message": invalid.message}, []
    header = {
        "ok": True,
        "meta": decoded.meta,
        "parts": [{"meta": meta, "length": len(data)} for meta, data in decoded.parts],
    }
    return header, [data for _, data in decoded.parts]


def main() -> None:
    memory = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    if memory > 0:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    job = json.loads(sys.stdin.buffer.read())
    header, parts = run_job(job, sys.stdout.buffer)
    _answer(sys.stdout.buffer, header, parts)


if __name__ == "__main__":
    main()

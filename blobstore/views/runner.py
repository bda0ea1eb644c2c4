"""Decoder jobs in worker processes: bounded in number, time, memory and answer size.

A process per job, not a pool: a decoder that hangs or corrupts its heap on hostile bytes takes nothing with
it, a killed one leaves no half-state behind, and nothing outlives the request that started it. The cost is
the interpreter's start (tens of milliseconds) on a view's first read; a second read is a cache lookup.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from typing import Any, Final

import anyio
from anyio.streams.buffered import BufferedByteReceiveStream

from blobstore.errors import BlobstoreError, Internal, MediaInvalid, ViewTimeout, ViewTooLarge, all_codes
from blobstore.views import progress
from blobstore.views.kind import Decoded

MAX_ANSWER_BYTES: Final = 64 * 1024 * 1024
"""The most a worker may send back (eight 1568-pixel frames as PNG are far below it)."""
_HEADER_LIMIT: Final = 1024 * 1024


def _error(code: str, message: str) -> BlobstoreError:
    cls = all_codes().get(code, Internal)
    return cls(message) if cls is not Internal else Internal()


def _kill_group(process: anyio.abc.Process) -> None:
    """Kill the worker and every process of its group (it leads one: ``start_new_session``)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        return  # the whole group has ended already
    except PermissionError:
        # Not ours to signal as a group (it cannot happen to a session we started): the worker at least.
        with contextlib.suppress(ProcessLookupError):
            process.kill()


class DecoderRunner:
    """Runs the jobs of :mod:`blobstore.views.jobs` in worker processes, at most ``workers`` at once."""

    def __init__(self, *, workers: int, timeout: float, memory_bytes: int) -> None:
        self.limiter = anyio.CapacityLimiter(workers)
        self.timeout = timeout
        self.memory_bytes = memory_bytes
        self.started = 0
        """Worker processes started so far (a cached view starts none)."""
        self.killed = 0
        """Workers killed past their time."""
        self.cancelled = 0
        """Workers killed because the call waiting for them was cancelled (its slot freed at once)."""

    async def run(self, op: str, **args: Any) -> Decoded:
        """The job's answer. Its progress lines, when the call listens (:mod:`blobstore.views.progress`),
        go to the call's reporter as they come; a cancelled call kills the worker's process group."""
        job = json.dumps({"op": op, "args": args, "progress": progress.is_reporting()}).encode()
        async with self.limiter:
            command = [sys.executable, "-m", "blobstore.views.worker", str(self.memory_bytes)]
            # A session of its own, so that killing the worker's process group also ends what the
            # worker started (the OCR program), which would otherwise outlive it.
            process = await anyio.open_process(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            self.started += 1
            try:
                with anyio.fail_after(self.timeout):
                    return await self._exchange(process, job)
            except TimeoutError:
                self.killed += 1
                raise ViewTimeout(
                    f"decoding took longer than {self.timeout:g} s; the worker was stopped",
                    timeout_seconds=self.timeout,
                ) from None
            except anyio.get_cancelled_exc_class():
                self.cancelled += 1
                raise
            finally:
                if process.returncode is None:
                    _kill_group(process)
                with anyio.CancelScope(shield=True):
                    await process.wait()
                    await process.aclose()

    async def _exchange(self, process: anyio.abc.Process, job: bytes) -> Decoded:
        assert process.stdin is not None
        assert process.stdout is not None
        await process.stdin.send(job)
        await process.stdin.aclose()
        reader = BufferedByteReceiveStream(process.stdout)
        while True:
            header = json.loads(await self._line(reader))
            told = progress.read_progress_line(header)
            if told is None:
                break
            await progress.report(*told)
        if not header.get("ok"):
            raise _error(str(header.get("code")), str(header.get("message")))
        parts = header.get("parts", [])
        if sum(int(part["length"]) for part in parts) > MAX_ANSWER_BYTES:
            raise ViewTooLarge("the view is larger than a view may be")
        decoded = Decoded(meta=header.get("meta", {}))
        for part in parts:
            try:
                data = await reader.receive_exactly(int(part["length"])) if part["length"] else b""
            except (anyio.EndOfStream, anyio.IncompleteRead):
                # Died between its header and the end of its parts, as when it ran out of address space.
                raise MediaInvalid(
                    "the decoder stopped on these bytes before its answer was complete"
                ) from None
            decoded.parts.append((part["meta"], data))
        return decoded

    @staticmethod
    async def _line(reader: BufferedByteReceiveStream) -> bytes:
        try:
            return await reader.receive_until(b"\n", _HEADER_LIMIT)
        except (anyio.EndOfStream, anyio.IncompleteRead):
            # The worker died without an answer: a native decoder crashed on these bytes, or ran out of
            # its address space before Python could report it.
            raise MediaInvalid("the decoder stopped on these bytes without an answer") from None
        except anyio.DelimiterNotFound:
            raise Internal() from None

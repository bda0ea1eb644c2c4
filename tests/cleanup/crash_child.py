"""Child process for the crash tests: one cleanup run that SIGKILLs itself at a chosen operation.

Settings come from ``BLOBSTORE_*``; ``CRASH_CLOCK_OFFSET`` shifts the service clock (seconds); ``CRASH_AT`` is
the 1-based index of the storage or metadata mutation before which the process kills itself (0: never), so
every state between two mutations can be produced.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio

from blobstore.cleanup import run_cleanup
from blobstore.config import load_settings
from blobstore.runtime import cleanup_parts, open_service

REPO_MUTATIONS = (
    "expire_artifacts",
    "mark_unreferenced_blobs",
    "claim_unreferenced_blobs",
    "drop_blob",
    "transition_upload",
    "delete_upload",
)
STORE_MUTATIONS = ("delete", "stage_abort", "sweep_temp")


def _armed(target: Any, names: tuple[str, ...], counter: list[int], crash_at: int) -> None:
    for name in names:
        original: Callable[..., Awaitable[Any]] = getattr(target, name)

        @functools.wraps(original)
        async def wrapper(*args: Any, __original: Any = original, **kwargs: Any) -> Any:
            counter[0] += 1
            if counter[0] == crash_at:
                os.kill(os.getpid(), signal.SIGKILL)
            return await __original(*args, **kwargs)

        setattr(target, name, wrapper)


async def main() -> None:
    offset = float(os.environ.get("CRASH_CLOCK_OFFSET", "0"))
    crash_at = int(os.environ.get("CRASH_AT", "0"))
    settings = load_settings()
    async with open_service(settings) as service:
        service.clock.source = lambda: datetime.now(UTC) + timedelta(seconds=offset)
        counter = [0]
        _armed(service.repo, REPO_MUTATIONS, counter, crash_at)
        _armed(service.blobs, STORE_MUTATIONS, counter, crash_at)
        report = await run_cleanup(cleanup_parts(service), batch_size=int(os.environ.get("CRASH_BATCH", "4")))
        sys.stdout.write(f"{counter[0]} {report.items}\n")


if __name__ == "__main__":
    anyio.run(main)

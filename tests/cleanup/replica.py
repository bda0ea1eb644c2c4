"""One server replica for the multi-replica test: the real app under uvicorn, with periodic cleanup running.

Settings come from ``BLOBSTORE_*`` (``BLOBSTORE_CLEANUP_INTERVAL_SECONDS`` included); the app is built
exactly as ``blobstore serve`` builds it, and :func:`blobstore.cleanup.periodic_cleanup` is entered in its
lifespan the way a server wires ``--cleanup-interval``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from fastapi import FastAPI

from blobstore.api.deps import app_state
from blobstore.asgi import build_app
from blobstore.cleanup import periodic_cleanup
from blobstore.config import load_settings


def main() -> None:
    settings = load_settings()
    app = build_app(settings)
    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(application: FastAPI) -> AsyncIterator[Any]:
        async with inner(application) as state:
            runtime = app_state(application).runtime
            async with periodic_cleanup(runtime.cleanup, settings.cleanup_interval_seconds):
                yield state

    app.router.lifespan_context = lifespan
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="warning", lifespan="on")


if __name__ == "__main__":
    main()

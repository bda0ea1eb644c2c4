"""The bare app's ranged read as one FastAPI route: what FastAPI's routing and response cost over bare ASGI.

Served like ``bench/bare_app.py`` (granian, one worker, ``--factory``). ``BARE_FILE`` names the payload;
``GET /payload`` with ``Range: bytes=a-b`` answers ``206`` with one ``os.pread`` of those bytes, done on the
event loop as the bare app does. Anything else is FastAPI's own ``404`` (the readiness probe takes any
answer).
"""

from __future__ import annotations

import os

from fastapi import FastAPI, Request, Response


def app() -> FastAPI:
    """granian's factory (``--factory``): the payload is opened in the worker, not at import."""
    fd = os.open(os.environ["BARE_FILE"], os.O_RDONLY)
    size = os.fstat(fd).st_size
    api = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)

    @api.get("/payload")
    async def payload(request: Request) -> Response:
        first, _, last = request.headers.get("range", "").removeprefix("bytes=").partition("-")
        start, end = int(first), min(int(last), size - 1)
        data = os.pread(fd, end - start + 1, start)
        headers = {"content-range": f"bytes {start}-{end}/{size}"}
        return Response(content=data, status_code=206, headers=headers)

    return api

"""The least ASGI app that can answer the suite's HTTP workloads: what any Python app costs on this machine.

Served by the same server and settings as ``blobstore serve`` (granian, one worker), it does no lookup, no
authentication, no integrity check, no logging and no durable write, so what it reaches bounds what any app
on that server can reach here. ``BARE_FILE`` names the payload it serves.

- ``GET /payload``: the whole file through ``http.response.pathsend``; with ``Range: bytes=a-b``, one
  ``pread`` of those bytes on the event loop, answered ``206``.
- ``GET`` of any other path: ``204`` (the readiness probe).
- ``PUT`` or ``POST`` anything: the body received and dropped, ``201`` with the byte count.

``BARE_WORK_US`` (default 0) adds that many microseconds of pure Python work, no system call, to each range
answer, before its ``pread``: ``bench/ceiling.py`` runs it at 100 to show what an app whose own path costs
that much can reach beside the bare app on the same server and machine.
"""

from __future__ import annotations

import os
import time
from typing import Any

Scope = dict[str, Any]


class BareApp:
    def __init__(self) -> None:
        self.path = os.environ["BARE_FILE"]
        self.fd = os.open(self.path, os.O_RDONLY)
        self.size = os.fstat(self.fd).st_size
        self.work = float(os.environ.get("BARE_WORK_US", "0")) / 1e6

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        if scope["method"] == "GET" and scope["path"] == "/payload":
            await self.get(scope, send)
            return
        if scope["method"] == "GET":  # anything else: the readiness probe
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        received = 0
        while True:
            message = await receive()
            received += len(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = str(received).encode()
        headers = [(b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": 201, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def get(self, scope: Scope, send: Any) -> None:
        wanted = next((value for name, value in scope["headers"] if name == b"range"), None)
        if wanted is None:
            headers = [(b"content-length", b"%d" % self.size)]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.pathsend", "path": self.path})
            return
        first, _, last = wanted.decode().removeprefix("bytes=").partition("-")
        start, end = int(first), min(int(last), self.size - 1)
        if self.work:
            busy(self.work)
        data = os.pread(self.fd, end - start + 1, start)
        headers = [
            (b"content-length", b"%d" % len(data)),
            (b"content-range", b"bytes %d-%d/%d" % (start, end, self.size)),
        ]
        await send({"type": "http.response.start", "status": 206, "headers": headers})
        await send({"type": "http.response.body", "body": data})


def busy(seconds: float) -> None:
    """Python bytecode for ``seconds`` of the clock (``perf_counter`` reads the vDSO: no system call, the GIL
    held throughout)."""
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


def app() -> BareApp:
    """granian's factory (``--factory``): the payload is opened in the worker, not at import."""
    return BareApp()

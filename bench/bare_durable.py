"""The least app that stores an upload durably: the store's durable work for a small upload, and nothing else.

Served like ``bench/bare_app.py`` (granian, one worker, ``--factory``). ``BARE_DIR`` names its directory.
Each ``PUT`` or ``POST`` (any path) receives the whole body, then, in a worker thread (one per request in
flight, up to 64): writes it to a new temp file in ``tmp/``, ``fsync``s it, renames it to
``blobs/<sha256>``, ``fsync``s ``blobs/``, and inserts one row (path, digest, size) into ``index.sqlite``
(WAL, ``synchronous=FULL``) and commits, one commit per upload on one connection. It answers ``201`` with the
digest. No lookup, no deduplication, no authentication, no logging. ``GET`` of any path answers ``204`` (the
readiness probe).
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import os
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

Scope = dict[str, Any]


class BareDurable:
    def __init__(self) -> None:
        root = Path(os.environ["BARE_DIR"])
        self.tmp, self.blobs = root / "tmp", root / "blobs"
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.blobs.mkdir(exist_ok=True)
        self.db = sqlite3.connect(root / "index.sqlite", check_same_thread=False, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute("CREATE TABLE IF NOT EXISTS blobs (name TEXT, sha256 TEXT, size INTEGER)")
        self.db_lock = threading.Lock()
        self.numbers = itertools.count()
        self.pool = ThreadPoolExecutor(max_workers=64)

    def store(self, name: str, body: bytes) -> str:
        """The durable write of one body; its SHA-256."""
        sha256 = hashlib.sha256(body).hexdigest()
        temp = self.tmp / f"{os.getpid()}-{next(self.numbers)}"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, body)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(temp, self.blobs / sha256)
        directory = os.open(self.blobs, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
        with self.db_lock:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute("INSERT INTO blobs VALUES (?, ?, ?)", (name, sha256, len(body)))
            self.db.execute("COMMIT")
        return sha256

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
        if scope["method"] == "GET":
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        parts = []
        while True:
            message = await receive()
            parts.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        loop = asyncio.get_running_loop()
        sha256 = await loop.run_in_executor(self.pool, self.store, scope["path"], b"".join(parts))
        body = sha256.encode()
        headers = [(b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": 201, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def app() -> BareDurable:
    """granian's factory (``--factory``): the database is opened in the worker, not at import."""
    return BareDurable()

"""Helpers for the completion-recovery tests: chunked and tus uploads of a file, the upload's state read
straight from the database, a SIGKILL of a whole server, and the digest of a download."""

from __future__ import annotations

import hashlib
import os
import signal
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tests.fixtures.server import Server
from tests.fixtures.waiting import wait_until

MiB = 1024 * 1024
CHUNK = 8 * MiB
TUS = {"Tus-Resumable": "1.0.0"}
OFFSET_STREAM = "application/offset+octet-stream"
ARTIFACT_HEADER = "Blobstore-Artifact-Id"
STATE_DEADLINE_SECONDS = 120.0


def begin_chunked(base: str, path: Path, sha256: str, *, name: str = "big.bin") -> str:
    size = path.stat().st_size
    created = httpx.post(
        f"{base}/v1/uploads",
        json={"name": name, "size": size, "sha256": sha256, "chunk_size": CHUNK},
        timeout=60,
    )
    assert created.status_code == 201, created.text
    upload_id: str = created.json()["upload_id"]
    with httpx.Client(base_url=base, timeout=120) as client, path.open("rb") as handle:
        index = 0
        while piece := handle.read(CHUNK):
            stored = client.put(f"/v1/uploads/{upload_id}/chunks/{index}", content=piece)
            assert stored.status_code == 200, stored.text
            index += 1
    return upload_id


def tus_create(base: str, size: int) -> str:
    created = httpx.post(f"{base}/tus/", headers={**TUS, "Upload-Length": str(size)}, timeout=60)
    assert created.status_code == 201, created.text
    return created.headers["Location"].rsplit("/", 1)[-1]


def tus_patch(
    base: str, upload_id: str, path: Path, offset: int, length: int, *, timeout: float
) -> httpx.Response:
    """PATCH ``length`` bytes of ``path`` from ``offset``, streamed from the file."""

    def body() -> Any:
        with path.open("rb") as handle:
            handle.seek(offset)
            left = length
            while left:
                piece = handle.read(min(MiB, left))
                left -= len(piece)
                yield piece

    headers = {
        **TUS,
        "Content-Type": OFFSET_STREAM,
        "Upload-Offset": str(offset),
        "Content-Length": str(length),
    }
    return httpx.patch(f"{base}/tus/{upload_id}", content=body(), headers=headers, timeout=timeout)


def sqlite_state(data_dir: Path) -> Callable[[str], str | None]:
    """Read an upload's state from the server's SQLite file (read-only, never waiting for the writer)."""
    database = data_dir / "metadata.sqlite3"

    def state(upload_id: str) -> str | None:
        conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=30)
        try:
            row = conn.execute("SELECT state FROM uploads WHERE id = ?", (upload_id,)).fetchone()
        finally:
            conn.close()
        return None if row is None else str(row[0])

    return state


def wait_for_state(
    read: Callable[[], str | None], wanted: str, *, deadline: float = STATE_DEADLINE_SECONDS
) -> None:
    """Poll until ``read()`` says ``wanted``; fail once the upload is ``completed`` or time runs out."""

    def reached() -> bool:
        current = read()
        assert current == wanted or current != "completed", (
            f"the upload completed before it was seen {wanted}"
        )
        return current == wanted

    # Polled often: the state is passing, and the test must see it before it is gone.
    wait_until(reached, within=deadline, what=f"the upload to reach {wanted}", interval=0.002)


def kill_server(server: Server) -> None:
    """SIGKILL the server and every process of its session (it leads one: ``start_new_session``)."""
    os.killpg(server.process.pid, signal.SIGKILL)
    server.process.wait(30)


def download_sha256(base: str, artifact_id: str) -> str:
    digest = hashlib.sha256()
    with httpx.stream("GET", f"{base}/v1/artifacts/{artifact_id}/content", timeout=120) as response:
        assert response.status_code == 200, response.read()
        for piece in response.iter_bytes(MiB):
            digest.update(piece)
    return digest.hexdigest()

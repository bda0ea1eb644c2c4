"""Completion leases across two replicas sharing PostgreSQL (and their blob directory).

The completion is held up by a lock the test takes on ``upload_chunks`` (the completer's first read of its
join waits for it), so a completion that lasts several leases is observed without relying on timing. A live
completer keeps renewing its lease and the other replica waits for its artifact; a completer that was killed
stops renewing, and the other replica finishes the upload once the lease ran out.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import threading
from collections.abc import Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import httpx
import pytest
from sqlalchemy.engine import make_url

from blobstore.metadata.migrate import upgrade
from tests.e2e.completion import begin_chunked, download_sha256, kill_server
from tests.fixtures.server import Server, start_server, stop_server
from tests.fixtures.waiting import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

LEASE_SECONDS = 6
RENEWALS = 3
TIMEOUT = 120.0
T = TypeVar("T")


class Database:
    """One PostgreSQL connection on an event loop of its own thread, for statements that must hold a lock
    while the test goes on."""

    def __init__(self, url: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
        self._conn: asyncpg.Connection = self.run(asyncpg.connect(dsn))

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(TIMEOUT)

    def execute(self, sql: str) -> None:
        self.run(self._conn.execute(sql))

    def lease(self, upload_id: str) -> tuple[str, str | None, datetime | None]:
        row = self.run(
            self._conn.fetchrow(
                "SELECT state, completion_owner, completion_lease_until FROM uploads WHERE id = $1", upload_id
            )
        )
        assert row is not None
        return row["state"], row["completion_owner"], row["completion_lease_until"]

    def artifacts(self) -> int:
        count: int = self.run(self._conn.fetchval("SELECT count(*) FROM artifacts"))
        return count

    def close(self) -> None:
        self.run(self._conn.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(TIMEOUT)
        self._loop.close()


@pytest.fixture
def replicas(pg_url: str, tmp_path: Path) -> Iterator[tuple[Server, Server, Database]]:
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(upgrade, pg_url).result()
    shared = tmp_path / "shared-blobs"
    shared.mkdir()
    env = {
        "BLOBSTORE_DATABASE_URL": pg_url,
        "BLOBSTORE_STORAGE_URL": shared.as_uri(),
        "BLOBSTORE_COMPLETION_LEASE_SECONDS": str(LEASE_SECONDS),
        "BLOBSTORE_LOG_LEVEL": "warning",
    }
    servers: list[Server] = []
    database = Database(pg_url)
    try:
        for name in ("a", "b"):
            root = tmp_path / name
            root.mkdir()
            servers.append(start_server(root, env=env))
        yield servers[0], servers[1], database
    finally:
        for server in servers:
            stop_server(server)
        database.close()


@pytest.fixture
def content(tmp_path: Path) -> tuple[Path, str]:
    data = os.urandom(4 * 1024 * 1024 + 123)
    path = tmp_path / "content.bin"
    path.write_bytes(data)
    return path, hashlib.sha256(data).hexdigest()


def _complete(base: str, upload_id: str) -> httpx.Response:
    return httpx.post(f"{base}/v1/uploads/{upload_id}/complete", json={}, timeout=TIMEOUT)


def _wait_for_completing(database: Database, upload_id: str) -> None:
    wait_until(
        lambda: database.lease(upload_id)[0] == "completing",
        within=TIMEOUT,
        what="the completion on replica a",
    )


def _begun_with_the_chunks_locked(
    a: Server, database: Database, content: tuple[Path, str]
) -> tuple[str, str]:
    """An upload of ``content`` begun on ``a`` with all its chunks, and its SHA-256; the chunk table is locked
    in the open transaction, so that a completion stalls until ``ROLLBACK``."""
    path, sha256 = content
    upload_id = begin_chunked(a.url, path, sha256)
    database.execute("BEGIN; LOCK TABLE upload_chunks IN ACCESS EXCLUSIVE MODE")
    return upload_id, sha256


def _assert_completed_once(
    database: Database, upload_id: str, server: Server, artifact_id: str, sha256: str
) -> None:
    """One artifact, the upload completed with its lease given up, and ``server`` serves the content."""
    assert database.lease(upload_id) == ("completed", None, None)
    assert database.artifacts() == 1
    assert download_sha256(server.url, artifact_id) == sha256


def test_a_live_completer_keeps_its_lease_and_the_other_replica_waits_for_its_artifact(
    replicas: tuple[Server, Server, Database], content: tuple[Path, str]
) -> None:
    a, b, database = replicas
    upload_id, sha256 = _begun_with_the_chunks_locked(a, database, content)
    locked = True
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            on_a = pool.submit(_complete, a.url, upload_id)
            _wait_for_completing(database, upload_id)
            _state, owner, first_lease = database.lease(upload_id)
            on_b = pool.submit(_complete, b.url, upload_id)
            seen = {first_lease}

            def renewed_enough() -> bool:
                # The completion outlasts several leases; its owner renews them, and nobody takes over.
                current = database.lease(upload_id)
                assert current[:2] == ("completing", owner), "the live completion was taken over"
                seen.add(current[2])
                assert not on_a.done()
                assert not on_b.done()
                return len(seen) > RENEWALS

            wait_until(renewed_enough, within=TIMEOUT, what=f"{RENEWALS} lease renewals")
            database.execute("ROLLBACK")
            locked = False
            done_a, done_b = on_a.result(TIMEOUT), on_b.result(TIMEOUT)
    finally:
        if locked:
            database.execute("ROLLBACK")
    assert (done_a.status_code, done_b.status_code) == (201, 201), (done_a.text, done_b.text)
    assert done_a.json()["id"] == done_b.json()["id"]
    _assert_completed_once(database, upload_id, b, done_a.json()["id"], sha256)


def test_a_killed_completer_is_taken_over_by_the_other_replica_once_its_lease_ran_out(
    replicas: tuple[Server, Server, Database], content: tuple[Path, str]
) -> None:
    a, b, database = replicas
    upload_id, sha256 = _begun_with_the_chunks_locked(a, database, content)
    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            on_a = pool.submit(_complete, a.url, upload_id)
            _wait_for_completing(database, upload_id)
            kill_server(a)
            with contextlib.suppress(httpx.TransportError):
                on_a.result(TIMEOUT)
    finally:
        database.execute("ROLLBACK")
    assert database.lease(upload_id)[0] == "completing"

    done = _complete(b.url, upload_id)

    assert done.status_code == 201, done.text
    _assert_completed_once(database, upload_id, b, done.json()["id"], sha256)

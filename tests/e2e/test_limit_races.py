"""Concurrent uploads against the namespace quota and the open-uploads limit, over real HTTP to real servers:
one server on SQLite, and two replicas sharing PostgreSQL (and their blob directory). The limits are checked
in the transaction that commits, so no interleaving of requests takes a namespace past them."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from blobstore.metadata.migrate import upgrade
from tests.fixtures.server import Server, start_server, stop_server

pytestmark = [pytest.mark.e2e]

MiB = 1024 * 1024
QUOTA = 10 * MiB
SIZE = 3 * MiB
CHUNK = 1 * MiB
UPLOADS = 8
ROUNDS = 3
"""The race does not show on every round; each round starts from an empty namespace."""
MAX_OPEN = 3
TIMEOUT = 120.0

Launch = Callable[[dict[str, str]], list[str]]


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def launch(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Launch]:
    """Start the servers with extra settings; their base URLs: one server on SQLite, or two replicas on one
    PostgreSQL database and one blob directory."""
    common = {"BLOBSTORE_LOG_LEVEL": "warning"}
    count = 1
    if request.param == "postgresql":
        url: str = request.getfixturevalue("pg_url")
        with ThreadPoolExecutor(max_workers=1) as pool:
            pool.submit(upgrade, url).result()
        shared = tmp_path / "shared-blobs"
        shared.mkdir()
        common.update({"BLOBSTORE_DATABASE_URL": url, "BLOBSTORE_STORAGE_URL": shared.as_uri()})
        count = 2
    servers: list[Server] = []

    def start(env: dict[str, str]) -> list[str]:
        for index in range(count):
            root = tmp_path / f"replica{index}"
            root.mkdir()
            servers.append(start_server(root, env={**common, **env}))
        return [server.url for server in servers]

    try:
        yield start
    finally:
        for server in servers:
            stop_server(server)


def _together(count: int, work: Callable[[int], httpx.Response]) -> list[httpx.Response]:
    """Run ``work(i)`` for ``i`` in ``range(count)`` on threads released at once."""
    barrier = threading.Barrier(count)

    def run(index: int) -> httpx.Response:
        barrier.wait(TIMEOUT)
        return work(index)

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(run, range(count)))


def _post_together(
    bases: list[str], path: str, request: Callable[[int], dict[str, Any]]
) -> list[httpx.Response]:
    """``UPLOADS`` POSTs to ``path``, the ``i``-th with ``request(i)``'s arguments, spread over the servers
    and released at once."""

    def post(index: int) -> httpx.Response:
        return httpx.post(f"{bases[index % len(bases)]}{path}", timeout=TIMEOUT, **request(index))

    return _together(UPLOADS, post)


def _accepted(answers: list[httpx.Response], refused: tuple[int, str]) -> list[httpx.Response]:
    """The answers that created something (201); every other one must be the ``refused`` status and code."""
    for answer in answers:
        if answer.status_code != 201:
            assert (answer.status_code, answer.json()["code"]) == refused, answer.text
    return [answer for answer in answers if answer.status_code == 201]


def _content(round_index: int, index: int) -> bytes:
    # Distinct content per upload: deduplication must not be what keeps the namespace small.
    return os.urandom(16) + bytes([round_index, index]) * ((SIZE - 16) // 2)


def _referenced(base: str) -> list[dict[str, object]]:
    listed = httpx.get(f"{base}/v1/artifacts", params={"limit": 1000}, timeout=TIMEOUT)
    assert listed.status_code == 200, listed.text
    items: list[dict[str, object]] = listed.json()["items"]
    return items


def _empty_namespace(base: str) -> None:
    for item in _referenced(base):
        deleted = httpx.delete(f"{base}/v1/artifacts/{item['id']}", timeout=TIMEOUT)
        assert deleted.status_code == 204, deleted.text


def _check_quota_round(bases: list[str], answers: list[httpx.Response]) -> None:
    accepted = _accepted(answers, (413, "quota_exceeded"))
    for base in bases:
        referenced = sum(int(str(item["size"])) for item in _referenced(base))
        assert referenced == len(accepted) * SIZE
        assert referenced <= QUOTA, f"{len(accepted)} uploads of 3 MiB accepted under a 10 MiB quota"
    # Only the quota stops an upload: as many as fit are accepted.
    assert len(accepted) == QUOTA // SIZE


def test_concurrent_single_request_uploads_never_exceed_the_namespace_quota(launch: Launch) -> None:
    bases = launch({"BLOBSTORE_NAMESPACE_QUOTA_BYTES": str(QUOTA)})
    for round_index in range(ROUNDS):

        def upload(index: int, round_index: int = round_index) -> dict[str, Any]:
            return {
                "params": {"name": f"r{round_index}-{index}.bin"},
                "content": _content(round_index, index),
                "headers": {"Content-Type": "application/octet-stream"},
            }

        _check_quota_round(bases, _post_together(bases, "/v1/artifacts", upload))
        _empty_namespace(bases[0])


def test_concurrent_chunked_completions_never_exceed_the_namespace_quota(launch: Launch) -> None:
    bases = launch({"BLOBSTORE_NAMESPACE_QUOTA_BYTES": str(QUOTA)})
    for round_index in range(ROUNDS):
        uploads: list[tuple[str, str]] = []
        for index in range(UPLOADS):
            base = bases[index % len(bases)]
            content = _content(round_index, index)
            created = httpx.post(
                f"{base}/v1/uploads",
                json={"name": f"r{round_index}-{index}.bin", "size": SIZE, "chunk_size": CHUNK},
                timeout=TIMEOUT,
            )
            assert created.status_code == 201, created.text
            upload_id = created.json()["upload_id"]
            for part in range(SIZE // CHUNK):
                stored = httpx.put(
                    f"{base}/v1/uploads/{upload_id}/chunks/{part}",
                    content=content[part * CHUNK : (part + 1) * CHUNK],
                    timeout=TIMEOUT,
                )
                assert stored.status_code == 200, stored.text
            uploads.append((base, upload_id))

        def complete(index: int, uploads: list[tuple[str, str]] = uploads) -> httpx.Response:
            base, upload_id = uploads[index]
            return httpx.post(f"{base}/v1/uploads/{upload_id}/complete", json={}, timeout=TIMEOUT)

        _check_quota_round(bases, _together(UPLOADS, complete))
        _empty_namespace(bases[0])


def test_concurrent_upload_creations_never_exceed_the_open_uploads_limit(launch: Launch) -> None:
    bases = launch({"BLOBSTORE_MAX_OPEN_UPLOADS": str(MAX_OPEN)})
    for round_index in range(ROUNDS):

        def begin(index: int, round_index: int = round_index) -> dict[str, Any]:
            return {"json": {"name": f"r{round_index}-{index}.bin", "size": SIZE}}

        created = _accepted(_post_together(bases, "/v1/uploads", begin), (429, "too_many_uploads"))
        assert len(created) == MAX_OPEN, f"{len(created)} uploads open under a limit of {MAX_OPEN}"
        for answer in created:
            aborted = httpx.delete(f"{bases[0]}/v1/uploads/{answer.json()['upload_id']}", timeout=TIMEOUT)
            assert aborted.status_code == 204, aborted.text

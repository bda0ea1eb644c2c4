"""A server killed (SIGKILL) while 16 small uploads are in flight: after a restart every upload it had
acknowledged is there with its bytes, and every artifact it lists is whole (an upload the kill cut short left
at most an unreferenced blob file, never an artifact without its content)."""

from __future__ import annotations

import hashlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.e2e.completion import kill_server
from tests.fixtures.server import serving, start_server
from tests.fixtures.waiting import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

IN_FLIGHT = 16
ACKNOWLEDGED_BEFORE_KILL = 64
ENV = {"BLOBSTORE_LOG_LEVEL": "warning"}


def upload_until_refused(
    base: str, worker: int, acknowledged: dict[str, bytes], lock: threading.Lock
) -> None:
    """New 1 KiB bodies one after the other until the server stops answering; the acknowledged ones kept."""
    with httpx.Client(base_url=base, timeout=60) as client:
        for number in range(100_000):
            body = f"{worker:04d}-{number:08d}-".encode() + os.urandom(1024 - 14)
            try:
                response = client.post(f"/v1/artifacts?name=small-{worker}-{number}.bin", content=body)
            except httpx.TransportError:
                return  # the server died with this upload in flight: it was never acknowledged
            if response.status_code != 201:
                return
            with lock:
                acknowledged[response.json()["id"]] = body


def every_artifact(client: httpx.Client) -> list[dict[str, str]]:
    items: list[dict[str, str]] = []
    cursor: str | None = None
    while True:
        params = {"limit": "1000"} if cursor is None else {"limit": "1000", "cursor": cursor}
        page = client.get("/v1/artifacts", params=params).json()
        items += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            return items


def test_a_killed_server_loses_no_acknowledged_small_upload(tmp_path: Path) -> None:
    server = start_server(tmp_path, env=ENV)
    acknowledged: dict[str, bytes] = {}
    lock = threading.Lock()
    with ThreadPoolExecutor(IN_FLIGHT) as pool:
        for worker in range(IN_FLIGHT):
            pool.submit(upload_until_refused, server.url, worker, acknowledged, lock)

        def enough() -> bool:
            with lock:
                return len(acknowledged) >= ACKNOWLEDGED_BEFORE_KILL

        wait_until(enough, within=120, what=f"{ACKNOWLEDGED_BEFORE_KILL} acknowledged uploads")
        kill_server(server)

    with (
        serving(tmp_path, env=ENV, data_dir=server.data_dir) as restarted,
        httpx.Client(base_url=restarted.url, timeout=60) as client,
    ):
        for artifact_id, body in acknowledged.items():
            response = client.get(f"/v1/artifacts/{artifact_id}/content")
            assert response.status_code == 200, artifact_id
            assert response.content == body
        listed = every_artifact(client)
        assert {item["id"] for item in listed} >= set(acknowledged)
        for item in listed:
            content = client.get(f"/v1/artifacts/{item['id']}/content")
            assert content.status_code == 200, item["id"]
            assert hashlib.sha256(content.content).hexdigest() == item["sha256"]

"""A full disk under a real ``blobstore serve`` (SQLite and blobs in one data directory on a small tmpfs).

Every write path answers ``507 storage_full`` (MCP: ``-32603`` with ``reason: storage_full``), metadata
writes included, on every try; reads keep working; ``/readyz`` says the storage is full; the CLI fails in one
line; an operator frees space with ``DELETE`` and ``blobstore cleanup --grace 0`` while the disk is still
full; once there is room again every path works.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.fixtures.commands import run_cli
from tests.fixtures.server import Server, cli_env, start_server, stop_server
from tests.fixtures.smallfs import fill, server_on_small_tmpfs

pytestmark = pytest.mark.e2e

MiB = 1024 * 1024
FS_SIZE = 24 * MiB
RESERVE = 1 * MiB
ARTIFACT_SIZE = 4 * MiB
CHUNK = 256 * 1024
TUS = {"Tus-Resumable": "1.0.0"}
PROBLEM = "application/problem+json"


def blob_files(data_dir: Path) -> list[Path]:
    return [path for path in (data_dir / "blobs" / "blobs").rglob("*") if path.is_file()]


@pytest.fixture
def full_disk_server(tmp_path: Path) -> Iterator[Server]:
    """A server whose data directory is a 24 MiB tmpfs; its log stays on the ordinary disk."""
    with server_on_small_tmpfs(tmp_path, FS_SIZE, RESERVE) as server:
        yield server


def assert_full(response: httpx.Response) -> None:
    assert response.status_code == 507, (response.status_code, response.text)
    assert response.headers["content-type"] == PROBLEM
    assert response.json()["code"] == "storage_full"


def one_line_failure(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


async def mcp_upload_begin_error(url: str) -> MCPError:
    async with Client(f"{url}/mcp") as client:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("upload_begin", {"name": "m.bin", "size": 1000})
    return caught.value


async def test_a_full_disk_is_507_everywhere_reads_go_on_and_delete_and_cleanup_free_it(
    full_disk_server: Server, tmp_path: Path
) -> None:
    server = full_disk_server
    data_dir = server.data_dir
    env = cli_env(tmp_path, server.url)
    admin_env = {**env, "BLOBSTORE_DATA_DIR": str(data_dir)}
    stored = os.urandom(ARTIFACT_SIZE)
    chunk = os.urandom(CHUNK)
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
        created = await http.post("/v1/artifacts", params={"name": "kept.bin"}, content=stored)
        assert created.status_code == 201, created.text
        artifact_id = created.json()["id"]
        begun = await http.post("/v1/uploads", json={"name": "c.bin", "size": 2 * CHUNK, "chunk_size": CHUNK})
        assert begun.status_code == 201, begun.text
        upload_id = begun.json()["upload_id"]
        tus_created = await http.post("/tus/", headers={**TUS, "Upload-Length": str(2 * CHUNK)})
        assert tus_created.status_code == 201, tus_created.text
        tus_location = tus_created.headers["location"]
        dropped = await http.post(
            "/v1/uploads", json={"name": "d.bin", "size": 2 * CHUNK, "chunk_size": CHUNK}
        )
        dropped_id = dropped.json()["upload_id"]
        assert (await http.put(f"/v1/uploads/{dropped_id}/chunks/0", content=chunk)).status_code == 200
        assert (await http.get("/readyz")).json()["status"] == "ok"

        fill(data_dir / "filler")

        assert_full(await http.post("/v1/uploads", json={"name": "n.bin", "size": 10}))
        assert_full(await http.patch(f"/v1/artifacts/{artifact_id}", json={"pinned": True}))
        assert_full(await http.post("/v1/artifacts", params={"name": "empty.bin"}, content=b""))
        assert_full(await http.post("/v1/artifacts", params={"name": "small.bin"}, content=b"x" * 5000))
        assert_full(await http.post("/tus/", headers={**TUS, "Upload-Length": "100"}))
        for _ in range(4):
            assert_full(await http.put(f"/v1/uploads/{upload_id}/chunks/0", content=chunk))
            assert_full(
                await http.patch(
                    tus_location,
                    content=chunk[:65536],
                    headers={
                        **TUS,
                        "Upload-Offset": "0",
                        "Content-Type": "application/offset+octet-stream",
                    },
                )
            )
        error = await mcp_upload_begin_error(server.url)
        assert error.code == -32603
        assert isinstance(error.error.data, dict)
        assert error.error.data["reason"] == "storage_full"

        read = await http.get(f"/v1/artifacts/{artifact_id}/content")
        assert (read.status_code, read.content == stored) == (200, True)
        window = await http.get(f"/v1/artifacts/{artifact_id}/content", params={"offset": 10, "length": 100})
        assert window.content == stored[10:110]
        assert [item["id"] for item in (await http.get("/v1/artifacts")).json()["items"]] == [artifact_id]
        ready = await http.get("/readyz")
        assert ready.json()["status"] == "storage_full", ready.text

        token = one_line_failure(
            run_cli(["token", "create", "--namespace", "ops", "--scopes", "read"], admin_env)
        )
        assert "storage_full" in token
        source = tmp_path / "upload.bin"
        source.write_bytes(os.urandom(3000))
        upload = one_line_failure(run_cli(["upload", str(source)], env))
        assert "storage_full" in upload

        # The way out, while the disk is still full: delete, then cleanup with no grace.
        aborted = await http.delete(f"/v1/uploads/{dropped_id}")
        assert aborted.status_code == 204, aborted.text
        assert not (data_dir / "blobs" / "staging" / dropped_id).exists()
        deleted = await http.delete(f"/v1/artifacts/{artifact_id}")
        assert deleted.status_code == 204, deleted.text
        assert (await http.get(f"/v1/artifacts/{artifact_id}")).status_code == 404
        assert len(blob_files(data_dir)) == 1
        cleaned = run_cli(["cleanup", "--grace", "0", "--json"], admin_env)
        assert cleaned.returncode == 0, cleaned.stderr
        report = json.loads(cleaned.stdout)
        blobs_step = next(step for step in report["steps"] if step["step"] == "blobs")
        assert (blobs_step["items"], blobs_step["bytes"]) == (1, ARTIFACT_SIZE)
        assert blob_files(data_dir) == []
        assert os.statvfs(data_dir).f_bavail * os.statvfs(data_dir).f_frsize >= ARTIFACT_SIZE - 2 * RESERVE

        (data_dir / "filler").unlink()
        ready = await http.get("/readyz")
        assert (ready.status_code, ready.json()["status"]) == (200, "ok"), ready.text
        again = await http.post("/v1/artifacts", params={"name": "again.bin"}, content=b"after")
        assert again.status_code == 201, again.text
        for index in range(2):
            put = await http.put(f"/v1/uploads/{upload_id}/chunks/{index}", content=chunk)
            assert put.status_code == 200, put.text
        assert (await http.post(f"/v1/uploads/{upload_id}/complete", json={})).status_code == 201
        tus_patch = await http.patch(
            tus_location,
            content=chunk,
            headers={**TUS, "Upload-Offset": "0", "Content-Type": "application/offset+octet-stream"},
        )
        assert tus_patch.status_code == 204, tus_patch.text
        assert (await http.post("/v1/uploads", json={"name": "n.bin", "size": 10})).status_code == 201
    token_ok = run_cli(["token", "create", "--namespace", "ops", "--scopes", "read"], admin_env)
    assert token_ok.returncode == 0, token_ok.stderr


async def test_a_server_restarted_on_a_full_disk_serves_reads_and_cleanup_runs_with_it_stopped(
    full_disk_server: Server, tmp_path: Path
) -> None:
    server = full_disk_server
    data_dir = server.data_dir
    admin_env = {**cli_env(tmp_path, server.url), "BLOBSTORE_DATA_DIR": str(data_dir)}
    kept = os.urandom(3000)
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
        doomed = await http.post(
            "/v1/artifacts", params={"name": "doomed.bin"}, content=os.urandom(ARTIFACT_SIZE)
        )
        stored = await http.post("/v1/artifacts", params={"name": "kept.bin"}, content=kept)
        assert (doomed.status_code, stored.status_code) == (201, 201)
        assert (await http.delete(f"/v1/artifacts/{doomed.json()['id']}")).status_code == 204
    stop_server(server)
    fill(data_dir / "filler")

    again = start_server(tmp_path, env={"BLOBSTORE_DISK_RESERVE_BYTES": str(RESERVE)})
    try:
        async with httpx.AsyncClient(base_url=again.url, timeout=60) as http:
            read = await http.get(f"/v1/artifacts/{stored.json()['id']}/content")
            assert (read.status_code, read.content == kept) == (200, True)
            ready = await http.get("/readyz")
            assert (ready.status_code, ready.json()["status"]) == (200, "storage_full"), ready.text
    finally:
        stop_server(again)

    cleaned = run_cli(["cleanup", "--grace", "0", "--json"], admin_env)
    assert cleaned.returncode == 0, cleaned.stderr
    blobs_step = next(step for step in json.loads(cleaned.stdout)["steps"] if step["step"] == "blobs")
    assert (blobs_step["items"], blobs_step["bytes"]) == (1, ARTIFACT_SIZE)
    assert len(blob_files(data_dir)) == 1

"""No token secret, no uploaded content (raw, base64 or hex) and no content digest in the logs of a live
server driven through every path that handles secrets or content.

It drives a live ``blobstore serve`` through uploads of each kind, MCP base64 chunks and reads, refused and
revoked tokens and failed checksums, then greps that server's output, its audit log and this process's
in-process log. Responses given to tenant A are checked too: they never carry tenant B's content digest. The
logs every other test left are swept at the end of the run (``tests/fixtures/log_sweep.py``).
"""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.fixtures.commands import run_cli
from tests.fixtures.server import start_server, stop_server
from tests.security import leaks
from tests.security.live import clean_env, create_token

pytestmark = pytest.mark.e2e


def content(label: str, size: int = 6000) -> bytes:
    data = f"{label}-{os.urandom(8).hex()}:".encode() + os.urandom(size)
    leaks.register_payload(data)
    return data


async def drive(url: str, a_token: str, b_token: str, revoked: str) -> list[str]:
    """Every path that sees secrets or content; returns the bodies of all responses given to A."""
    a = {"Authorization": f"Bearer {a_token}"}
    b = {"Authorization": f"Bearer {b_token}"}
    to_a: list[str] = []
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        b_data = content("zz-tenant-b")
        b_art = (await http.post("/v1/artifacts", params={"name": "b.bin"}, content=b_data, headers=b)).json()

        a_raw = content("zz-raw")
        digest = base64.b64encode(hashlib.sha256(a_raw).digest()).decode()
        raw = await http.post(
            "/v1/artifacts",
            params={"name": "raw.bin"},
            content=a_raw,
            headers={**a, "Content-Digest": f"sha-256=:{digest}:"},
        )
        a_form = content("zz-form")
        form = await http.post(
            "/v1/artifacts", files={"file": ("form.bin", a_form)}, data={"name": "form.bin"}, headers=a
        )
        a_chunked = content("zz-chunked", 2048)[:4096]
        begun = await http.post("/v1/uploads", json={"name": "c.bin", "chunk_size": 2048}, headers=a)
        upload_id = begun.json()["upload_id"]
        wrong = await http.put(
            f"/v1/uploads/{upload_id}/chunks/0",
            content=a_chunked[:2048],
            headers={
                **a,
                "Content-Digest": f"sha-256=:{base64.b64encode(hashlib.sha256(b'x').digest()).decode()}:",
            },
        )
        parts = [
            await http.put(
                f"/v1/uploads/{upload_id}/chunks/{i}", content=a_chunked[i * 2048 : (i + 1) * 2048], headers=a
            )
            for i in range(2)
        ]
        done = await http.post(f"/v1/uploads/{upload_id}/complete", json={}, headers=a)
        reads = [
            await http.get(f"/v1/artifacts/{raw.json()['id']}/content", headers=a),
            await http.get(
                f"/v1/artifacts/{raw.json()['id']}/content", headers={**a, "Range": "bytes=10-99,200-300"}
            ),
            await http.get(f"/v1/artifacts/{b_art['id']}/content", headers=a),
            await http.get(f"/v1/artifacts/{b_art['id']}", headers=a),
            await http.get("/v1/artifacts", headers=a),
            await http.post(
                "/v1/uploads",
                content=b'{"name": "' + a_token.encode() + b'", "size": "x"}',
                headers={**a, "Content-Type": "application/json"},
            ),
        ]
        refused = [
            await http.get("/v1/artifacts", headers={"Authorization": f"Bearer {a_token}x"}),
            await http.get("/v1/artifacts", headers={"Authorization": f"Bearer {revoked}"}),
            await http.get("/v1/artifacts", headers={"Authorization": f"Basic {a_token}"}),
        ]
        to_a += [r.text for r in (raw, form, begun, wrong, *parts, done, *reads)]
        assert [r.status_code for r in (raw, form, done)] == [201, 201, 201]
        assert wrong.status_code == 422
        assert [r.status_code for r in refused] == [401, 401, 401]

    a_mcp = content("zz-mcp", 3000)
    async with (
        httpx2.AsyncClient(headers=a, timeout=30) as raw_http,
        Client(streamable_http_client(f"{url}/mcp", http_client=raw_http)) as client,
    ):
        begun_mcp = await client.call_tool(
            "upload_begin", {"name": "m.bin", "size": len(a_mcp), "chunk_size": 2048}
        )
        assert begun_mcp.structured_content is not None
        mcp_upload = begun_mcp.structured_content["upload_id"]
        for index in range(2):
            piece = a_mcp[index * 2048 : (index + 1) * 2048]
            await client.call_tool(
                "upload_chunk",
                {"upload_id": mcp_upload, "index": index, "data": base64.b64encode(piece).decode()},
            )
        bad = await client.call_tool(
            "upload_chunk", {"upload_id": mcp_upload, "index": 0, "data": "!!not base64!!" + a_token}
        )
        committed = await client.call_tool("upload_commit", {"upload_id": mcp_upload})
        assert not committed.is_error
        assert committed.structured_content is not None
        uri = committed.structured_content["uri"]
        whole = await client.read_resource(uri)
        window = await client.read_resource(f"{uri}?offset=100&length=1000")
        tool = await client.call_tool("read_artifact", {"uri": f"blobstore://artifacts/{b_art['id']}"})
        to_a += [str(bad), str(committed), str(whole), str(window), str(tool)]
    return to_a


async def test_no_secret_content_or_digest_reaches_any_log(tmp_path: Path) -> None:
    env = clean_env(tmp_path, BLOBSTORE_MIN_CHUNK_SIZE="1024", BLOBSTORE_LOG_LEVEL="info")
    a_token = create_token(env, "zz-a")["token"]
    b_token = create_token(env, "zz-b")["token"]
    revoked = create_token(env, "zz-a", "read")
    assert run_cli(["token", "revoke", revoked["id"]], env).returncode == 0
    server = start_server(tmp_path, "--server", "uvicorn", env=env)
    try:
        assert server.process.poll() is None, server.log_text()
        to_a = await drive(server.url, a_token, b_token, revoked["token"])
    finally:
        stop_server(server)

    payloads = leaks.registered_payloads()
    b_digest = next(hashlib.sha256(p).hexdigest() for p in payloads if p.startswith(b"zz-tenant-b"))
    assert not [text for text in to_a if b_digest in text]

    logs = leaks.known_logs(tmp_path)
    assert server.log in logs
    assert tmp_path / "audit.jsonl" in logs
    assert leaks.inprocess_log in logs
    audit = (tmp_path / "audit.jsonl").read_text()
    assert '"action":"upload"' in audit
    assert '"action":"read"' in audit
    assert '"action":"authenticate"' in audit
    assert len(leaks.registered_secrets()) >= 3
    assert len(payloads) >= 5
    assert leaks.sweep(logs) == {}

"""The audit log: one JSON line per upload, completion, read, delete, cleanup step and refused credential,
with the token id as actor, and never content, base64 of content, digests of content or a secret."""

from __future__ import annotations

import base64
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from blobstore.audit import AuditLog
from blobstore.cleanup import run_cleanup
from blobstore.config import Settings
from blobstore.runtime import cleanup_parts
from blobstore.service import ArtifactService
from tests.security import leaks
from tests.security.conftest import McpConnect, Tenant, payload

FIELDS = {
    "time",
    "actor",
    "namespace",
    "action",
    "artifact_id",
    "size",
    "mime_type",
    "duration_ms",
    "result",
}


def audit_lines(settings: Settings) -> list[dict[str, Any]]:
    assert settings.audit_log is not None
    return [json.loads(line) for line in settings.audit_log.read_text().splitlines()]


async def test_every_action_writes_one_structured_line_without_content(
    http: httpx.AsyncClient,
    service: ArtifactService,
    settings: Settings,
    tenant_a: Tenant,
    mcp_as: McpConnect,
) -> None:
    data = payload("audited", 4000)
    stored = await http.post(
        "/v1/artifacts",
        params={"name": "a.bin", "mime_type": "application/x-test", "ttl_seconds": 60},
        content=data,
        headers=tenant_a.headers,
    )
    artifact_id = stored.json()["id"]
    await http.get(f"/v1/artifacts/{artifact_id}/content", headers=tenant_a.headers)
    await http.get(
        f"/v1/artifacts/{artifact_id}/content", headers={**tenant_a.headers, "Range": "bytes=0-99"}
    )
    chunked = await http.post(
        "/v1/uploads", json={"name": "c.txt", "size": 1024, "chunk_size": 1024}, headers=tenant_a.headers
    )
    upload_id = chunked.json()["upload_id"]
    await http.put(f"/v1/uploads/{upload_id}/chunks/0", content=data[:1024], headers=tenant_a.headers)
    completed = await http.post(f"/v1/uploads/{upload_id}/complete", json={}, headers=tenant_a.headers)
    async with mcp_as(tenant_a) as client:
        await client.read_resource(f"blobstore://artifacts/{artifact_id}?offset=0&length=512")
        await client.read_resource(f"blobstore://artifacts/{completed.json()['id']}")
    await http.delete(f"/v1/artifacts/{completed.json()['id']}", headers=tenant_a.headers)
    await http.get("/v1/artifacts", headers={"Authorization": f"Bearer {tenant_a.token}x"})
    later = service.clock() + timedelta(hours=1)
    service.clock.source = lambda: later
    await run_cleanup(cleanup_parts(service), steps=("expire",))

    lines = audit_lines(settings)
    actions = [(line["action"], line["result"]) for line in lines]
    assert actions == [
        ("upload", "ok"),
        ("read", "ok"),
        ("read", "ok"),
        ("upload_begin", "ok"),
        ("complete", "ok"),
        ("read", "ok"),
        ("read", "ok"),
        ("delete", "ok"),
        ("authenticate", "unauthorized"),
        ("expire", "ok"),
    ]
    for line in lines:
        assert set(line) >= FIELDS
    upload = lines[0]
    assert upload["actor"] == tenant_a.token_id
    assert upload["namespace"] == tenant_a.namespace
    assert (upload["artifact_id"], upload["size"], upload["mime_type"]) == (
        artifact_id,
        len(data),
        "application/x-test",
    )
    assert isinstance(upload["duration_ms"], int)
    assert [line["size"] for line in lines[1:3]] == [len(data), 100]
    assert lines[-1]["actor"] == "cleanup"
    assert lines[-1]["artifact_id"] == artifact_id
    text = settings.audit_log.read_text() if settings.audit_log else ""
    assert leaks.find_leaks(text, frozenset({tenant_a.token}), [data]) == []
    assert base64.b64encode(data[:48]).decode() not in text


async def test_failed_uploads_are_audited_with_their_error_code(
    http: httpx.AsyncClient, settings: Settings, tenant_a: Tenant
) -> None:
    digest = "0" * 64
    refused = await http.post(
        "/v1/artifacts",
        params={"name": "x.bin", "sha256": digest},
        content=b"bytes",
        headers=tenant_a.headers,
    )
    assert refused.status_code == 422
    (line,) = audit_lines(settings)
    assert (line["action"], line["result"], line["actor"]) == ("upload", "digest_mismatch", tenant_a.token_id)
    assert digest not in json.dumps(line)


async def test_the_audit_file_is_private(
    http: httpx.AsyncClient, settings: Settings, tenant_a: Tenant
) -> None:
    await http.post("/v1/artifacts", params={"name": "x.bin"}, content=b"x", headers=tenant_a.headers)
    assert settings.audit_log is not None
    assert settings.audit_log.stat().st_mode & 0o777 == 0o600


def test_the_leak_search_finds_content_at_any_offset_and_encoding() -> None:
    import hashlib

    data = b"marker-0123456789abcdef:" + bytes(range(256)) * 4
    for start in range(3):
        chunk = data[start + 100 : start + 700]
        for encoded in (
            base64.b64encode(chunk).decode(),
            base64.urlsafe_b64encode(chunk).decode(),
            chunk.hex(),
        ):
            assert leaks.find_leaks(f"x {encoded} y", frozenset(), [data]) != []
    assert leaks.find_leaks(hashlib.sha256(data).hexdigest(), frozenset(), [data]) == ["content sha256"]
    token = "bst_" + "A" * 16 + "_" + "B" * 43
    assert leaks.find_leaks("B" * 43, frozenset({token}), []) == ["token secret"]
    assert leaks.find_leaks("id AAAAAAAAAAAAAAAA only", frozenset({token}), [data]) == []


def test_a_rotated_audit_file_is_left_within_the_reopen_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The file stays open between lines (one write per line); renamed away, it gets lines until the path
    # is opened again, then a new file at the path gets them, private like the first.
    moments = iter([0.0, 0.5, 1.0 + 1e-6, 1.5])
    monkeypatch.setattr("blobstore.audit.time.monotonic", lambda: next(moments))
    path = tmp_path / "audit.jsonl"
    audit = AuditLog(path)

    def read(artifact_id: str) -> None:
        audit.record(actor="local", namespace="ns", action="read", result="ok", artifact_id=artifact_id)

    read("a_first")  # opened at 0.0
    path.rename(tmp_path / "audit.jsonl.1")
    read("a_second")  # 0.5: still the open, renamed file
    read("a_third")  # past a second: the path again, a new file
    audit.close()
    rotated = [
        json.loads(text)["artifact_id"] for text in (tmp_path / "audit.jsonl.1").read_text().splitlines()
    ]
    fresh = [json.loads(text)["artifact_id"] for text in path.read_text().splitlines()]
    assert rotated == ["a_first", "a_second"]
    assert fresh == ["a_third"]
    assert path.stat().st_mode & 0o777 == 0o600

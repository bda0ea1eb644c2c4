"""Namespace isolation: tenant A can list, read, range-read, change, complete, abort or delete nothing of
tenant B's, over HTTP and over MCP, and B's real ids get exactly the answer ids that never existed get."""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from mcp.shared.exceptions import MCPError

from blobstore.ids import new_artifact_id, new_upload_id
from blobstore.service import ArtifactService
from tests.security.conftest import McpConnect, Tenant, payload


@dataclass(frozen=True)
class Holdings:
    """What tenant B owns: an artifact (with its content) and an open upload with one chunk received."""

    artifact_id: str
    content: bytes
    upload_id: str
    chunk: bytes


async def b_holdings(http: httpx.AsyncClient, tenant_b: Tenant) -> Holdings:
    content = payload("tenant-b-artifact")
    stored = await http.post(
        "/v1/artifacts", params={"name": "b-secret.bin"}, content=content, headers=tenant_b.headers
    )
    assert stored.status_code == 201, stored.text
    chunk = payload("tenant-b-chunk", 1024)[:1024]
    begun = await http.post(
        "/v1/uploads",
        json={"name": "b-upload.bin", "chunk_size": 1024, "size": 2048},
        headers=tenant_b.headers,
    )
    assert begun.status_code == 201, begun.text
    upload_id = begun.json()["upload_id"]
    put = await http.put(f"/v1/uploads/{upload_id}/chunks/0", content=chunk, headers=tenant_b.headers)
    assert put.status_code == 200, put.text
    return Holdings(stored.json()["id"], content, upload_id, chunk)


# (method, path template, keyword arguments) for every route that takes an artifact or upload id.
ARTIFACT_CALLS: list[tuple[str, str, dict[str, Any]]] = [
    ("GET", "/v1/artifacts/{id}", {}),
    ("GET", "/v1/artifacts/{id}/content", {}),
    ("GET", "/v1/artifacts/{id}/content", {"headers": {"Range": "bytes=0-9"}}),
    ("GET", "/v1/artifacts/{id}/content", {"headers": {"Range": "bytes=0-1,5-9"}}),
    ("GET", "/v1/artifacts/{id}/content", {"params": {"offset": "0", "length": "16"}}),
    ("HEAD", "/v1/artifacts/{id}/content", {}),
    ("PATCH", "/v1/artifacts/{id}", {"json": {"pinned": True}}),
    ("PATCH", "/v1/artifacts/{id}", {"json": {"ttl_seconds": 60}}),
    ("DELETE", "/v1/artifacts/{id}", {}),
]
UPLOAD_CALLS: list[tuple[str, str, dict[str, Any]]] = [
    ("GET", "/v1/uploads/{id}", {}),
    ("PUT", "/v1/uploads/{id}/chunks/1", {"content": b"\x00" * 1024}),
    ("PUT", "/v1/uploads/{id}/chunks/0", {"content": b"\x01" * 1024}),
    ("POST", "/v1/uploads/{id}/complete", {"json": {}}),
    ("DELETE", "/v1/uploads/{id}", {}),
]


def comparable(response: httpx.Response) -> tuple[int, str, Any]:
    """Status, type and body, less the request's own id (which differs for every request by design)."""
    body = response.json()
    if isinstance(body, dict):
        body.pop("request_id", None)
    return response.status_code, response.headers.get("content-type", ""), body


@pytest.mark.parametrize(("method", "path", "kwargs"), ARTIFACT_CALLS + UPLOAD_CALLS)
async def test_foreign_ids_get_the_same_404_as_ids_that_never_existed(
    http: httpx.AsyncClient,
    tenant_a: Tenant,
    tenant_b: Tenant,
    method: str,
    path: str,
    kwargs: dict[str, Any],
) -> None:
    held = await b_holdings(http, tenant_b)
    is_upload = path.startswith("/v1/uploads")
    real = held.upload_id if is_upload else held.artifact_id
    never = new_upload_id() if is_upload else new_artifact_id()
    foreign = await http.request(method, path.format(id=real), **_as(tenant_a, kwargs))
    missing = await http.request(method, path.format(id=never), **_as(tenant_a, kwargs))
    if method == "HEAD":
        assert (foreign.status_code, foreign.headers.get("content-type")) == (
            missing.status_code,
            missing.headers.get("content-type"),
        )
        assert foreign.status_code == 404
    else:
        assert foreign.status_code == 404, foreign.text
        assert comparable(foreign) == comparable(missing)
        assert real not in foreign.text
    await assert_b_untouched(http, tenant_b, held)


def _as(tenant: Tenant, kwargs: dict[str, Any]) -> dict[str, Any]:
    copied = {key: dict(value) if isinstance(value, dict) else value for key, value in kwargs.items()}
    copied["headers"] = {**copied.get("headers", {}), **tenant.headers}
    return copied


async def assert_b_untouched(http: httpx.AsyncClient, tenant_b: Tenant, held: Holdings) -> None:
    content = await http.get(f"/v1/artifacts/{held.artifact_id}/content", headers=tenant_b.headers)
    assert (content.status_code, content.content) == (200, held.content)
    meta = await http.get(f"/v1/artifacts/{held.artifact_id}", headers=tenant_b.headers)
    assert meta.json()["pinned"] is False
    status = await http.get(f"/v1/uploads/{held.upload_id}", headers=tenant_b.headers)
    assert status.json()["state"] == "open"
    assert status.json()["bytes_received"] == 1024
    assert status.json()["missing"] == [1]


async def test_listing_shows_only_the_callers_namespace_and_never_a_foreign_digest(
    http: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant
) -> None:
    held = await b_holdings(http, tenant_b)
    own = await http.post(
        "/v1/artifacts", params={"name": "a.bin"}, content=b"a's bytes", headers=tenant_a.headers
    )
    listed = await http.get("/v1/artifacts", headers=tenant_a.headers)
    assert [item["id"] for item in listed.json()["items"]] == [own.json()["id"]]
    assert held.artifact_id not in listed.text
    assert hashlib.sha256(held.content).hexdigest() not in listed.text


async def test_same_content_in_two_namespaces_stays_two_artifacts_and_reveals_nothing(
    http: httpx.AsyncClient, service: ArtifactService, tenant_a: Tenant, tenant_b: Tenant
) -> None:
    """Dedup never skips receiving bytes: A uploading B's content gets its own artifact, with no hint."""
    held = await b_holdings(http, tenant_b)
    copy = await http.post(
        "/v1/artifacts", params={"name": "guess.bin"}, content=held.content, headers=tenant_a.headers
    )
    assert copy.status_code == 201
    body = copy.json()
    assert body["id"] != held.artifact_id
    assert set(body) == set(
        (await http.get(f"/v1/artifacts/{held.artifact_id}", headers=tenant_b.headers)).json()
    )
    # A deleting its copy leaves B's artifact whole.
    assert (await http.delete(f"/v1/artifacts/{body['id']}", headers=tenant_a.headers)).status_code == 204
    await assert_b_untouched(http, tenant_b, held)


async def test_a_declared_digest_is_not_an_existence_oracle(
    http: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant
) -> None:
    """Claiming B's digest up front changes nothing: the upload still needs every byte, and bytes that do not
    match the claim are refused exactly as for an unknown digest."""
    held = await b_holdings(http, tenant_b)
    known = hashlib.sha256(held.content).hexdigest()
    unknown = hashlib.sha256(b"never stored anywhere").hexdigest()
    answers = []
    for digest in (known, unknown):
        begun = await http.post(
            "/v1/uploads",
            json={"name": "probe.bin", "size": len(held.content), "sha256": digest, "chunk_size": 1024},
            headers=tenant_a.headers,
        )
        assert begun.status_code == 201
        upload_id = begun.json()["upload_id"]
        status = await http.get(f"/v1/uploads/{upload_id}", headers=tenant_a.headers)
        done = await http.post(f"/v1/uploads/{upload_id}/complete", json={}, headers=tenant_a.headers)
        answers.append((status.json()["missing"], done.status_code, done.json()["code"]))
    assert answers[0] == answers[1]
    assert answers[0][1:] == (422, "upload_incomplete")


# -- MCP -------------------------------------------------------------------------------------------------


def _normalise(value: Any, real: str, never: str) -> str:
    return json.dumps(value, sort_keys=True, default=str).replace(real, "ID").replace(never, "ID")


async def test_mcp_lists_and_reads_nothing_of_another_namespace(
    http: httpx.AsyncClient, mcp_as: McpConnect, tenant_a: Tenant, tenant_b: Tenant
) -> None:
    held = await b_holdings(http, tenant_b)
    never = new_artifact_id()
    async with mcp_as(tenant_a) as client:
        listed = await client.list_resources()
        outcomes = []
        for artifact_id in (held.artifact_id, never):
            for suffix in ("", "?offset=0&length=10"):
                with pytest.raises(MCPError) as caught:
                    await client.read_resource(f"blobstore://artifacts/{artifact_id}{suffix}")
                outcomes.append((caught.value.code, caught.value.message, caught.value.data))
    assert all(r.uri != f"blobstore://artifacts/{held.artifact_id}" for r in listed.resources)
    assert {code for code, _m, _d in outcomes} == {-32602}
    real_view = [_normalise(o, held.artifact_id, never) for o in outcomes[:2]]
    never_view = [_normalise(o, held.artifact_id, never) for o in outcomes[2:]]
    assert real_view == never_view


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("read_artifact", {"uri": "blobstore://artifacts/{artifact}"}),
        ("read_artifact", {"uri": "blobstore://artifacts/{artifact}", "offset": 0, "length": 8}),
        ("upload_status", {"upload_id": "{upload}"}),
        (
            "upload_chunk",
            {"upload_id": "{upload}", "index": 1, "data": base64.b64encode(b"z" * 1024).decode()},
        ),
        ("upload_commit", {"upload_id": "{upload}"}),
        ("upload_abort", {"upload_id": "{upload}"}),
    ],
)
async def test_mcp_tools_treat_foreign_ids_as_never_existing(
    http: httpx.AsyncClient,
    mcp_as: McpConnect,
    tenant_a: Tenant,
    tenant_b: Tenant,
    tool: str,
    arguments: dict[str, Any],
) -> None:
    held = await b_holdings(http, tenant_b)
    never_artifact, never_upload = new_artifact_id(), new_upload_id()

    def fill(artifact: str, upload: str) -> dict[str, Any]:
        return {
            k: v.format(artifact=artifact, upload=upload) if isinstance(v, str) and "{" in v else v
            for k, v in arguments.items()
        }

    async with mcp_as(tenant_a) as client:
        foreign = await client.call_tool(tool, fill(held.artifact_id, held.upload_id))
        missing = await client.call_tool(tool, fill(never_artifact, never_upload))
    assert foreign.is_error
    assert missing.is_error
    assert foreign.structured_content is not None
    assert foreign.structured_content["error"]["code"] == "not_found"
    real_view = _normalise(foreign.structured_content, held.artifact_id, held.upload_id)
    never_view = _normalise(missing.structured_content, never_artifact, never_upload)
    assert real_view == never_view
    await assert_b_untouched(http, tenant_b, held)

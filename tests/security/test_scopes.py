"""Scopes per endpoint and per tool: GET/HEAD need read, everything that changes state needs write; a missing
scope is 403 ``forbidden`` (always on the caller's own namespace)."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest
from mcp.shared.exceptions import MCPError

from blobstore.models import Scope
from blobstore.service import ArtifactService
from tests.security.conftest import McpConnect, Tenant, issue

READ = frozenset({Scope.READ})
WRITE = frozenset({Scope.WRITE})

# (method, path, kwargs, needed scope, status when allowed)
ENDPOINTS: list[tuple[str, str, dict[str, Any], Scope, int]] = [
    ("GET", "/v1/artifacts", {}, Scope.READ, 200),
    ("GET", "/v1/artifacts/{artifact}", {}, Scope.READ, 200),
    ("GET", "/v1/artifacts/{artifact}/content", {}, Scope.READ, 200),
    ("GET", "/v1/artifacts/{artifact}/content", {"headers": {"Range": "bytes=0-3"}}, Scope.READ, 206),
    ("HEAD", "/v1/artifacts/{artifact}/content", {}, Scope.READ, 200),
    ("GET", "/v1/uploads/{upload}", {}, Scope.READ, 200),
    ("POST", "/v1/artifacts", {"params": {"name": "n.bin"}, "content": b"new"}, Scope.WRITE, 201),
    ("PATCH", "/v1/artifacts/{artifact}", {"json": {"pinned": True}}, Scope.WRITE, 200),
    ("DELETE", "/v1/artifacts/{artifact}", {}, Scope.WRITE, 204),
    ("POST", "/v1/uploads", {"json": {"name": "u.bin"}}, Scope.WRITE, 201),
    ("PUT", "/v1/uploads/{upload}/chunks/0", {"content": b"c" * 1024}, Scope.WRITE, 200),
    ("POST", "/v1/uploads/{upload}/complete", {"json": {}}, Scope.WRITE, 422),  # allowed: 1 of 2 chunks
    ("DELETE", "/v1/uploads/{upload}", {}, Scope.WRITE, 204),
]


async def _own_objects(http: httpx.AsyncClient, writer: Tenant) -> dict[str, str]:
    stored = await http.post(
        "/v1/artifacts", params={"name": "x.bin"}, content=b"0123456789", headers=writer.headers
    )
    begun = await http.post(
        "/v1/uploads", json={"name": "u.bin", "size": 2048, "chunk_size": 1024}, headers=writer.headers
    )
    assert stored.status_code == begun.status_code == 201
    artifact_id = stored.json()["id"]
    return {
        "artifact": artifact_id,
        "uri": f"blobstore://artifacts/{artifact_id}",
        "upload": begun.json()["upload_id"],
    }


async def _team_objects(
    http: httpx.AsyncClient, service: ArtifactService, scopes: frozenset[Scope]
) -> tuple[Tenant, Tenant, dict[str, str]]:
    """A writer of "team" with its own artifact and open upload (their ids), and a caller of "team" who
    holds only ``scopes``."""
    writer = await issue(service, "team")
    caller = await issue(service, "team", scopes)
    return writer, caller, await _own_objects(http, writer)


@pytest.mark.parametrize(("method", "path", "kwargs", "needed", "allowed_status"), ENDPOINTS)
@pytest.mark.parametrize("held", [Scope.READ, Scope.WRITE])
async def test_each_endpoint_needs_its_scope(
    http: httpx.AsyncClient,
    service: ArtifactService,
    method: str,
    path: str,
    kwargs: dict[str, Any],
    needed: Scope,
    allowed_status: int,
    held: Scope,
) -> None:
    _writer, caller, ids = await _team_objects(http, service, frozenset({held}))
    call = {**kwargs, "headers": {**kwargs.get("headers", {}), **caller.headers}}
    response = await http.request(method, path.format(**ids), **call)
    if held is needed:
        assert response.status_code == allowed_status, response.text
    else:
        assert response.status_code == 403, response.text
        if method != "HEAD":
            assert response.json()["code"] == "forbidden"
            assert response.json()["required_scope"] == needed.value


async def test_a_missing_scope_answers_the_same_for_any_id(
    http: httpx.AsyncClient, service: ArtifactService
) -> None:
    """Scope is checked before the lookup, so a 403 says nothing about whether an id exists anywhere."""
    owner = await issue(service, "other")
    reader = await issue(service, "team", READ)
    theirs = await _own_objects(http, owner)
    answers = {
        # One request id for all three, so that only what the server chose to say can differ.
        (
            await http.delete(
                f"/v1/artifacts/{artifact_id}", headers={**reader.headers, "X-Request-Id": "same"}
            )
        ).text
        for artifact_id in (theirs["artifact"], "a_" + "A" * 24, "not-even-an-id")
    }
    assert len(answers) == 1
    assert '"forbidden"' in answers.pop()


async def test_health_probes_and_the_schema_need_no_token(
    http: httpx.AsyncClient, service: ArtifactService
) -> None:
    await issue(service, "team")
    for path in ("/healthz", "/readyz", "/openapi.json"):
        assert (await http.get(path)).status_code == 200


# -- MCP -------------------------------------------------------------------------------------------------


async def test_mcp_read_scope_lists_and_reads_but_cannot_upload(
    http: httpx.AsyncClient, service: ArtifactService, mcp_as: McpConnect
) -> None:
    writer, reader, ids = await _team_objects(http, service, READ)
    uri = ids["uri"]
    async with mcp_as(reader) as client:
        listed = await client.list_resources()
        templates = await client.list_resource_templates()
        read = await client.read_resource(uri)
        tool_read = await client.call_tool("read_artifact", {"uri": uri})
        writes: dict[str, dict[str, Any]] = {
            "upload_begin": {"name": "x.bin"},
            "upload_chunk": {
                "upload_id": ids["upload"],
                "index": 0,
                "data": base64.b64encode(b"c").decode(),
            },
            "upload_status": {"upload_id": ids["upload"]},
            "upload_commit": {"upload_id": ids["upload"]},
            "upload_abort": {"upload_id": ids["upload"]},
        }
        denied = {name: await client.call_tool(name, args) for name, args in writes.items()}
    assert [r.uri for r in listed.resources] == [uri]
    assert templates.resource_templates
    assert read.contents
    assert not tool_read.is_error
    for name, result in denied.items():
        assert result.is_error, name
        assert result.structured_content is not None
        assert result.structured_content["error"]["code"] == "forbidden", name
    status = await http.get(f"/v1/uploads/{ids['upload']}", headers=writer.headers)
    assert status.json()["state"] == "open"


async def test_mcp_write_scope_uploads_but_cannot_list_or_read(
    http: httpx.AsyncClient, service: ArtifactService, mcp_as: McpConnect
) -> None:
    _writer, write_only, ids = await _team_objects(http, service, WRITE)
    async with mcp_as(write_only) as client:
        uri = ids["uri"]
        begun = await client.call_tool("upload_begin", {"name": "w.bin", "chunk_size": 1024})
        errors = []
        for call in (client.list_resources(), client.read_resource(uri), client.list_resource_templates()):
            with pytest.raises(MCPError) as caught:
                await call
            errors.append((caught.value.code, (caught.value.data or {}).get("reason")))
        tool_read = await client.call_tool("read_artifact", {"uri": uri})
    assert not begun.is_error
    assert errors == [(-32600, "forbidden")] * 3
    assert tool_read.is_error
    assert tool_read.structured_content is not None
    assert tool_read.structured_content["error"]["code"] == "forbidden"

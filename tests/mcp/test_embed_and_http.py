"""Embedding into another server, the error mapping, and the HTTP mount's limits."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.server import MCPServer, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.types import EmptyResult, SubscribeRequest, SubscribeRequestParams
from starlette.types import Message

from blobstore.config import Settings
from blobstore.errors import RequestTimeout, all_codes
from blobstore.models import Caller
from blobstore.runtime import compose
from blobstore.service import ArtifactService
from blobstore.web_origins import allowed_origins, host_allow_list
from mcp_resources.embed import embed_store
from mcp_resources.errors import unmapped_codes
from mcp_resources.transports.http import McpHttpExtension, max_request_body, needs_event_stream
from mcp_resources.transports.server import create_server
from mcp_resources.uris import window_uri
from tests.fixtures.mcp_wire import initialize_request
from tests.mcp.conftest import Dataset, put

CALLER = Caller(namespace="embedded")


def host_server() -> MCPServer:
    mcp = MCPServer("host")

    @mcp.resource("notes://today", mime_type="text/plain")
    def today() -> str:
        return "own resource"

    @mcp.tool()
    def ping() -> str:
        """Answer pong."""
        return "pong"

    return mcp


async def test_embedded_store_serves_beside_the_hosts_own_resources_and_tools(
    service: ArtifactService,
) -> None:
    ids = [
        (await put(service, f"item {i}".encode(), f"i{i}.txt", "text/plain", caller=CALLER)).id
        for i in range(7)
    ]
    mcp = host_server()
    embed_store(mcp, service, caller=CALLER, tools=True, page_size=3)
    async with Client(mcp) as client:
        uris: list[str] = []
        cursor = None
        while True:
            page = await client.list_resources(cursor=cursor)
            uris.extend(r.uri for r in page.resources)
            cursor = page.next_cursor
            if cursor is None:
                break
        templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
        own = await client.read_resource("notes://today")
        stored = await client.read_resource(f"blobstore://artifacts/{ids[0]}")
        tools = {t.name for t in (await client.list_tools()).tools}
        pong = await client.call_tool("ping", {})
    assert uris[0] == "notes://today"
    assert sorted(uris[1:]) == sorted(f"blobstore://artifacts/{i}" for i in ids)
    assert len(uris) == len(set(uris))
    assert "blobstore://artifacts/{artifact_id}{?offset,length}" in templates
    assert own.contents[0].text == "own resource"  # type: ignore[union-attr]
    assert stored.contents[0].text == "item 0"  # type: ignore[union-attr]
    assert {"ping", "upload_begin", "read_artifact"} <= tools
    assert pong.content[0].text == "pong"  # type: ignore[union-attr]


async def test_embedded_store_reads_only_its_callers_artifacts(service: ArtifactService) -> None:
    other = await put(service, b"secret", "s.txt", "text/plain", caller=Caller(namespace="someone-else"))
    mcp = host_server()
    embed_store(mcp, service, caller=CALLER)
    async with Client(mcp) as client:
        with pytest.raises(MCPError) as caught:
            await client.read_resource(other.uri)
    assert (caught.value.code, caught.value.message, caught.value.data["uri"]) == (
        -32602,
        "Resource not found",
        other.uri,
    )


async def test_put_once_returns_the_live_twin_and_stores_what_differs(service: ArtifactService) -> None:
    store = embed_store(host_server(), service, caller=CALLER)
    first = await store.put_once(b"same bytes", name="a.txt", mime_type="text/plain", metadata={"k": "v"})
    again = await store.put_once(b"same bytes", name="a.txt", mime_type="text/plain", metadata={"k": "v"})
    renamed = await store.put_once(b"same bytes", name="b.txt", mime_type="text/plain", metadata={"k": "v"})
    other = await store.put_once(b"same bytes", name="a.txt", metadata={"k": "w"}, caller=Caller("elsewhere"))
    assert again.id == first.id
    assert (first.mime_type, first.metadata) == ("text/plain", {"k": "v"})
    assert renamed.id != first.id
    assert (other.id != first.id, other.namespace) == (True, "elsewhere")
    with pytest.raises(TypeError):
        await store.put_once(b"new bytes", name="c.txt", colour="red")  # type: ignore[call-arg]


def test_every_catalogue_code_has_a_jsonrpc_mapping() -> None:
    assert all_codes()
    assert unmapped_codes() == set()


def test_request_limit_admits_a_base64_chunk_of_twice_the_limit_with_its_envelope() -> None:
    settings = Settings(mcp_chunk_max=3 * 1024 * 1024)
    assert max_request_body(settings) == 8 * 1024 * 1024 + 64 * 1024
    assert max_request_body(Settings()) == 4 * -(-4 * 1024 * 1024 // 3) + 64 * 1024
    assert max_request_body(Settings(mcp_chunk_max=1024)) == 4 * 1024 * 1024


def test_rebinding_protection_allows_configured_names_only() -> None:
    """One list of names and origins for the whole server, /mcp included (the API's request guard)."""
    public = Settings(host="0.0.0.0", public_url="https://store.example.com")
    assert host_allow_list(public).allows_header("store.example.com")
    assert not host_allow_list(public).allows_header("evil.example")
    assert "https://store.example.com" in allowed_origins(public)
    assert not host_allow_list(Settings()).allows_header("evil.example")


def _initialize(padding: int = 0) -> bytes:
    return json.dumps(initialize_request("t", _meta={"pad": "x" * padding})).encode()


async def test_http_mount_refuses_foreign_hosts_and_oversized_bodies(http_base: str) -> None:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(base_url=http_base) as http:
        ok = await http.post("/mcp", content=_initialize(), headers=headers)
        rebound = await http.post("/mcp", content=_initialize(), headers={**headers, "Host": "evil.example"})
        huge = await http.post("/mcp", content=_initialize(padding=6 * 1024 * 1024), headers=headers)
        streamed = await http.post(
            "/mcp", content=_pieces(_initialize(padding=6 * 1024 * 1024)), headers=headers
        )
    assert ok.status_code == 200
    assert (rebound.status_code, rebound.json()["code"]) == (421, "host_not_allowed")  # as every route
    for refused in (huge, streamed):
        assert (refused.status_code, refused.headers["content-type"]) == (413, "application/json")
        body = refused.json()
        assert (body["id"], body["error"]["code"], body["error"]["data"]["reason"]) == (
            None,
            -32602,
            "limit_exceeded",
        )


async def _pieces(data: bytes) -> AsyncIterator[bytes]:
    """A body without ``Content-Length`` (chunked transfer coding): refused once it passes the limit."""
    for start in range(0, len(data), 256 * 1024):
        yield data[start : start + 256 * 1024]


def _legacy_request(method: str, params: dict[str, object]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}).encode()


async def test_handshake_era_answers_are_json_unless_progress_is_asked_for(
    http_base: str, dataset: Dataset
) -> None:
    """A 1 MiB window as one server-sent event is over the Python SDK's default event cap: reads are JSON."""
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }
    window = window_uri(dataset.big.id, 0, 1024 * 1024)
    async with httpx.AsyncClient(base_url=http_base, timeout=60) as http:
        read = await http.post(
            "/mcp", content=_legacy_request("resources/read", {"uri": window}), headers=headers
        )
        read_with_token = await http.post(
            "/mcp",
            content=_legacy_request("resources/read", {"uri": window, "_meta": {"progressToken": 1}}),
            headers=headers,
        )
        commit_with_token = await http.post(
            "/mcp",
            content=_legacy_request(
                "tools/call",
                {
                    "name": "upload_commit",
                    "arguments": {"upload_id": "u_none"},
                    "_meta": {"progressToken": 1},
                },
            ),
            headers=headers,
        )
    assert read.headers["content-type"].startswith("application/json")
    assert len(read.json()["result"]["contents"][0]["blob"]) > 1024 * 1024
    assert read_with_token.headers["content-type"].startswith("application/json")
    assert commit_with_token.headers["content-type"].startswith("text/event-stream")


@pytest.mark.parametrize(
    ("body", "streams"),
    [
        (
            b'{"method": "tools/call", "params": {"name": "upload_commit", "_meta": {"progressToken": "p"}}}',
            True,
        ),
        (
            b'{"method": "tools/call", "params": {"name": "upload_commit", "_meta": {"progressToken": null}}}'
            b"",
            False,
        ),
        (
            b'{"method": "tools/call", "params": {"name": "read_artifact", "_meta": {"progressToken": 1}}}',
            False,
        ),
        (
            b'{"method": "tools/call", "params": {"name": "read_artifact", '
            b'"arguments": {"uri": "u", "pages": "2"}, "_meta": {"progressToken": 1}}}',
            True,
        ),
        (
            b'{"method": "tools/call", "params": {"name": "read_artifact", '
            b'"arguments": {"uri": "u", "pages": "2"}}}',
            False,
        ),
        (
            b'{"method": "tools/call", "params": {"name": "read_artifact", '
            b'"arguments": {"uri": "u", "offset": 2}, "_meta": {"progressToken": 1}}}',
            False,
        ),
        (
            b'{"method": "resources/read", "params": {"uri": "blobstore://artifacts/a/pages/1.png", '
            b'"_meta": {"progressToken": 1}}}',
            False,
        ),
        (b'{"method": "subscriptions/listen", "params": {}}', True),
        (b'{"method": "resources/read", "params": {"uri": "progressToken"}}', False),
        (b'{"method": "tools/call", "params": {"name": "upload_commit"}}', False),
        (b'[{"method": "subscriptions/listen"}]', False),
        (b"progressToken{", False),
    ],
)
def test_only_progress_tool_calls_and_listens_need_an_event_stream(body: bytes, streams: bool) -> None:
    assert needs_event_stream(body) is streams


# -- one error mapping for every store request handler -------------------------------------------------


def _failing_caller(ctx: ServerRequestContext[Any, Any]) -> Caller:
    raise RuntimeError("secret detail of a broken resolver")


@pytest.mark.parametrize(
    ("method", "call"),
    [
        ("resources/list", lambda client: client.list_resources()),
        ("resources/templates/list", lambda client: client.list_resource_templates()),
        ("resources/read", lambda client: client.read_resource("blobstore://artifacts/a_x")),
        (
            "tools/call",
            lambda client: client.call_tool("read_artifact", {"uri": "blobstore://artifacts/a_x"}),
        ),
        ("resources/subscribe", lambda client: _subscribe(client, "blobstore://artifacts/a_x")),
        ("subscriptions/listen", lambda client: _listen(client)),
    ],
)
async def test_an_unexpected_failure_in_any_store_handler_is_internal_without_its_text(
    service: ArtifactService, method: str, call: Callable[[Client], Awaitable[object]]
) -> None:
    server = create_server(service, caller_for=_failing_caller)
    mode = "legacy" if method == "resources/subscribe" else "auto"
    async with Client(server, mode=mode) as client:
        with pytest.raises(MCPError) as caught:
            await call(client)
    error = caught.value
    assert (error.code, error.message, error.data["reason"]) == (-32603, "internal error", "internal")
    assert "secret" not in json.dumps(error.error.model_dump(mode="json"))


async def _subscribe(client: Client, uri: str) -> None:
    await client.session.send_request(SubscribeRequest(params=SubscribeRequestParams(uri=uri)), EmptyResult)


async def _listen(client: Client) -> None:
    async with client.listen(resources_list_changed=True):
        raise AssertionError("the listen stream was acknowledged")


async def test_a_stalled_body_at_the_http_mount_is_a_408_jsonrpc_request_timeout(
    service: ArtifactService,
) -> None:
    """The API's body guard raises ``request_timeout`` from ``receive``; /mcp answers it in JSON-RPC."""
    extension = McpHttpExtension(service.settings)
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json")],
        "client": ("127.0.0.1", 50000),
    }
    sent: list[Message] = []

    async def stalled() -> Message:
        raise RequestTimeout(timeout_seconds=1)

    async def send(message: Message) -> None:
        sent.append(message)

    async with extension.lifespan(compose(service)):
        await extension.app(scope, stalled, send)
    start, body = sent[0], json.loads(b"".join(m.get("body", b"") for m in sent[1:]))
    assert (start["status"], dict(start["headers"])[b"content-type"]) == (408, b"application/json")
    assert (body["id"], body["error"]["code"], body["error"]["data"]["reason"]) == (
        None,
        -32600,
        "request_timeout",
    )

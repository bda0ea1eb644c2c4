"""Upload and read tools with the official client: in memory and over streamable HTTP."""

from __future__ import annotations

import base64
import hashlib
import os
from typing import Any

import httpx
import pytest
from mcp.types import CallToolResult, EmbeddedResource, ResourceLink

from blobstore.runtime import open_service
from mcp_resources.uris import window_uri
from tests.mcp.conftest import CALLER, Dataset, connect

MiB = 1024 * 1024


def facts(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def failure(result: CallToolResult) -> dict[str, Any]:
    assert result.is_error
    assert isinstance(result.structured_content, dict)
    error: dict[str, Any] = result.structured_content["error"]
    return error


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.mark.parametrize("transport", ["memory", "http", "http-legacy"], indirect=True)
async def test_mcp_upload_with_a_repeated_chunk_dedups_onto_the_http_upload(
    transport: str, dataset: Dataset, request: pytest.FixtureRequest
) -> None:
    http_base = request.getfixturevalue("http_base")
    data = os.urandom(10 * MiB)
    digest = hashlib.sha256(data).hexdigest()
    seen: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total))

    async with connect(transport, dataset, request) as client:
        begun = facts(await client.call_tool("upload_begin", {"name": "ten.bin", "size": len(data)}))
        chunk = begun["chunk_size"]
        assert chunk == begun["max_chunk"] == 2 * MiB
        assert begun["chunk_count"] == 5
        order = [3, 0, 2, 1, 2, 4]  # chunk 2 twice
        for index in order:
            piece = data[index * chunk : (index + 1) * chunk]
            sent = facts(
                await client.call_tool(
                    "upload_chunk", {"upload_id": begun["upload_id"], "index": index, "data": b64(piece)}
                )
            )
            assert sent["sha256"] == hashlib.sha256(piece).hexdigest()
        status = facts(await client.call_tool("upload_status", {"upload_id": begun["upload_id"]}))
        assert (status["received_bytes"], status["missing"]) == (len(data), [])
        committed = await client.call_tool(
            "upload_commit",
            {"upload_id": begun["upload_id"], "sha256": digest},
            progress_callback=on_progress,
        )
    stored = facts(committed)
    assert stored["sha256"] == digest
    assert stored["size"] == len(data)
    text, link = committed.content
    assert text.type == "text"
    assert isinstance(link, ResourceLink)
    assert (link.uri, link.size, link.name) == (stored["uri"], len(data), "ten.bin")
    assert seen, "no progress notifications"
    assert [done for done, _ in seen] == sorted({done for done, _ in seen})
    assert seen[-1] == (len(data), len(data))

    async with httpx.AsyncClient(base_url=http_base) as http:
        response = await http.post("/v1/artifacts", params={"name": "ten-http.bin"}, content=data)
        assert response.status_code == 201
        http_id = response.json()["id"]
    async with open_service(dataset.settings) as service:
        via_mcp = await service.get_artifact(CALLER, stored["artifact_id"])
        via_http = await service.get_artifact(CALLER, http_id)
    assert via_mcp.sha256 == via_http.sha256 == digest
    assert via_mcp.blob_id == via_http.blob_id


async def test_upload_tool_errors_are_tool_errors_with_codes(
    dataset: Dataset, request: pytest.FixtureRequest
) -> None:
    async with connect("memory", dataset, request) as client:
        begun = facts(await client.call_tool("upload_begin", {"name": "e.bin", "size": 3 * MiB}))
        upload_id = begun["upload_id"]
        first = os.urandom(2 * MiB)
        facts(
            await client.call_tool("upload_chunk", {"upload_id": upload_id, "index": 0, "data": b64(first)})
        )

        changed = failure(
            await client.call_tool(
                "upload_chunk", {"upload_id": upload_id, "index": 0, "data": b64(os.urandom(2 * MiB))}
            )
        )
        assert changed["code"] == "chunk_conflict"
        too_big = failure(
            await client.call_tool(
                "upload_chunk", {"upload_id": upload_id, "index": 1, "data": b64(os.urandom(2 * MiB + 1))}
            )
        )
        assert (too_big["code"], too_big["maxChunk"]) == ("limit_exceeded", 2 * MiB)
        assert (
            failure(
                await client.call_tool("upload_chunk", {"upload_id": upload_id, "index": 1, "data": "@@@"})
            )["code"]
            == "invalid_request"
        )
        incomplete = failure(await client.call_tool("upload_commit", {"upload_id": upload_id}))
        assert (incomplete["code"], incomplete["missing"]) == ("upload_incomplete", [1])
        assert failure(await client.call_tool("upload_begin", {"name": "x", "chunk_size": 4 * MiB}))[
            "code"
        ] == ("invalid_request")
        assert failure(await client.call_tool("upload_begin", {"nam": "typo"}))["code"] == "invalid_request"

        facts(await client.call_tool("upload_abort", {"upload_id": upload_id}))
        closed = failure(
            await client.call_tool("upload_chunk", {"upload_id": upload_id, "index": 1, "data": b64(b"x")})
        )
        assert closed["code"] == "upload_not_open"
        unknown = failure(
            await client.call_tool("upload_status", {"upload_id": "u_AAAAAAAAAAAAAAAAAAAAAAAA"})
        )
        assert unknown["code"] == "not_found"


@pytest.mark.parametrize("transport", ["http", "http-legacy"], indirect=True)
async def test_an_oversized_chunk_over_streamable_http_is_the_limit_exceeded_tool_error(
    transport: str, dataset: Dataset, request: pytest.FixtureRequest
) -> None:
    """A chunk too large for the tool must reach the tool, not the transport's own body limit."""
    async with connect(transport, dataset, request) as client:
        begun = facts(await client.call_tool("upload_begin", {"name": "o.bin", "size": 8 * MiB}))
        for raw in (3 * MiB, 4 * MiB):  # 4 and 5.3 MiB of base64: over the SDK's default 4 MiB body limit
            refused = await client.call_tool(
                "upload_chunk", {"upload_id": begun["upload_id"], "index": 0, "data": b64(os.urandom(raw))}
            )
            assert (failure(refused)["code"], failure(refused)["maxChunk"]) == ("limit_exceeded", 2 * MiB)
        status = facts(await client.call_tool("upload_status", {"upload_id": begun["upload_id"]}))
        assert status["received_bytes"] == 0


@pytest.mark.parametrize("transport", ["http", "http-legacy"], indirect=True)
async def test_a_request_too_large_for_any_chunk_is_a_limit_exceeded_protocol_error(
    transport: str, dataset: Dataset, request: pytest.FixtureRequest
) -> None:
    """Far past the chunk limit the body is refused before it is read, still with the catalogue code."""
    from mcp.shared.exceptions import MCPError

    async with connect(transport, dataset, request) as client:
        begun = facts(await client.call_tool("upload_begin", {"name": "h.bin", "size": 8 * MiB}))
        with pytest.raises(MCPError) as caught:
            await client.call_tool(
                "upload_chunk",
                {"upload_id": begun["upload_id"], "index": 0, "data": b64(os.urandom(6 * MiB))},
            )
    assert caught.value.code == -32602
    assert (caught.value.data["reason"], caught.value.data["maxChunk"]) == ("limit_exceeded", 2 * MiB)


async def test_read_artifact_tool_returns_a_window_as_content_blocks(
    dataset: Dataset, request: pytest.FixtureRequest
) -> None:
    async with connect("memory-legacy", dataset, request) as client:
        window = await client.call_tool(
            "read_artifact", {"uri": dataset.big.uri, "offset": 100, "length": 50}
        )
        whole = await client.call_tool("read_artifact", {"uri": dataset.text.uri})
        refused = await client.call_tool("read_artifact", {"uri": dataset.big.uri})
    summary, embedded = window.content
    assert summary.type == "text"
    assert window_uri(dataset.big.id, 150, 50) in summary.text
    assert isinstance(embedded, EmbeddedResource)
    assert base64.b64decode(embedded.resource.blob) == dataset.big_bytes[100:150]  # type: ignore[union-attr]
    assert whole.content[1].resource.text == dataset.text_body  # type: ignore[union-attr]
    error = failure(refused)
    assert (error["code"], error["first"]) == ("range_required", window_uri(dataset.big.id, 0, MiB))


async def test_read_artifact_clamps_a_huge_length_and_refuses_a_huge_offset(
    dataset: Dataset, request: pytest.FixtureRequest
) -> None:
    huge = 10**25
    async with connect("memory", dataset, request) as client:
        clamped = await client.call_tool(
            "read_artifact", {"uri": dataset.big.uri, "offset": 7, "length": huge}
        )
        far = await client.call_tool("read_artifact", {"uri": dataset.big.uri, "offset": huge, "length": 10})
        in_uri = await client.call_tool("read_artifact", {"uri": f"{dataset.big.uri}?offset=0&length={huge}"})
    _summary, embedded = clamped.content
    assert base64.b64decode(embedded.resource.blob) == dataset.big_bytes[7 : 7 + MiB]  # type: ignore[union-attr]
    assert failure(far)["code"] == "range_not_satisfiable"
    assert in_uri.structured_content is not None
    assert in_uri.structured_content["window"]["length"] == MiB


async def test_tools_are_listed_with_schemas(dataset: Dataset, request: pytest.FixtureRequest) -> None:
    async with connect("memory", dataset, request) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) == {
        "upload_begin",
        "upload_chunk",
        "upload_status",
        "upload_commit",
        "upload_abort",
        "read_artifact",
    }
    assert tools["upload_chunk"].input_schema["required"] == ["upload_id", "index", "data"]
    assert str(2 * MiB) in (tools["upload_chunk"].description or "")


async def test_unknown_tool_is_a_protocol_error(dataset: Dataset, request: pytest.FixtureRequest) -> None:
    from mcp.shared.exceptions import MCPError

    async with connect("memory", dataset, request) as client:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("format_disk", {})
    assert caught.value.code == -32602

"""The embedding server's own tools: handles where they take base64, and the rules of file parameters."""

from __future__ import annotations

import base64
import hashlib
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote_from_bytes

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.server import MCPServer
from pydantic import Field

from blobstore.config import Settings
from blobstore.runtime import open_service
from blobstore.service import ArtifactService
from mcp_resources.embed import embed_store
from mcp_resources.tools.binary_schema import HANDLE_HINT
from mcp_resources.tools.file_params import FileInput, parse_data_url
from mcp_resources.tools.handles import AUDIT_ACTION
from tests.handles.conftest import CALLER, audit_lines, put
from tests.handles.file_service import file_service

DATA = bytes(range(256)) * 40
Base64Image = Annotated[
    str, Field(description="The image, base64.", json_schema_extra={"contentEncoding": "base64"})
]


def tool_server(service: ArtifactService, seen: list[Any]) -> MCPServer:
    mcp = MCPServer("tools")
    embed_store(mcp, service, caller=CALLER)

    @mcp.tool()
    def digest_base64(image: Base64Image, label: str = "") -> str:
        """sha256 of base64 bytes."""
        return hashlib.sha256(base64.b64decode(image)).hexdigest() + label

    @mcp.tool()
    async def keep_path(image: FileInput, note: FileInput | None = None) -> str:
        """Where the file was."""
        async with image.path() as path:
            seen.append((path, path.stat().st_mode & 0o777, path.read_bytes() == DATA))
        return "ok"

    @mcp.tool()
    async def read_whole(image: FileInput) -> int:
        """Read it whole."""
        return len(await image.read())

    return mcp


async def test_a_handle_where_an_embedded_tool_takes_base64_becomes_the_bytes(
    service: ArtifactService,
) -> None:
    artifact = await put(service, DATA, "data.bin")
    async with Client(tool_server(service, [])) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        result = await client.call_tool("digest_base64", {"image": artifact.uri, "label": artifact.uri})
    described = tools["digest_base64"].input_schema["properties"]["image"]["description"]
    assert described == f"The image, base64; {HANDLE_HINT}"
    assert tools["digest_base64"].meta is None or "openai/fileParams" not in tools["digest_base64"].meta
    assert tools["keep_path"].meta is not None
    assert tools["keep_path"].meta["openai/fileParams"] == ["image", "note"]
    # The label is plain text: the URI reaches the tool as it is.
    assert result.content[0].text == hashlib.sha256(DATA).hexdigest() + artifact.uri  # type: ignore[union-attr]
    assert [line["argument"] for line in audit_lines(service, AUDIT_ACTION)] == ["image"]


async def test_a_file_parameters_path_is_private_and_gone_after_the_call(service: ArtifactService) -> None:
    artifact = await put(service, DATA, "data.bin")
    seen: list[Any] = []
    async with Client(tool_server(service, seen)) as client:
        assert not (await client.call_tool("keep_path", {"image": artifact.uri})).is_error
        assert not (await client.call_tool("keep_path", {"image": base64.b64encode(DATA).decode()})).is_error
    assert [(mode, same) for _path, mode, same in seen] == [(0o600, True), (0o600, True)]
    assert not any(path.exists() for path, _mode, _same in seen)


async def test_read_refuses_more_than_the_cap_and_names_it(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", proxy_max_argument_bytes=1000)
    async with open_service(settings) as service:
        artifact = await put(service, DATA, "data.bin")
        async with Client(tool_server(service, [])) as client:
            result = await client.call_tool("read_whole", {"image": artifact.uri})
    assert result.structured_content is not None
    assert result.structured_content["error"]["code"] == "limit_exceeded"
    assert "BLOBSTORE_PROXY_MAX_ARGUMENT_BYTES" in result.structured_content["error"]["message"]


async def test_downloads_are_capped_and_removed_after_the_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spools = tmp_path / "tmp"
    spools.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spools))
    with file_service({"/big": DATA, "/small": DATA[:500]}) as (origin, asked):
        settings = Settings(
            data_dir=tmp_path / "data",
            proxy_max_argument_bytes=1000,
            file_download_origins=(origin,),
            file_download_networks=("127.0.0.0/8",),
        )
        async with open_service(settings) as service:
            seen: list[Any] = []
            async with Client(tool_server(service, seen)) as client:
                big = await client.call_tool(
                    "read_whole", {"image": {"download_url": f"{origin}/big", "file_id": "b"}}
                )
                small = await client.call_tool(
                    "read_whole", {"image": {"download_url": f"{origin}/small", "file_id": "s"}}
                )
                missing = await client.call_tool(
                    "read_whole", {"image": {"download_url": f"{origin}/nothing", "file_id": "n"}}
                )
    assert big.structured_content is not None
    assert big.structured_content["error"]["code"] == "limit_exceeded"
    assert small.structured_content == {"result": 500}
    assert missing.structured_content is not None
    assert missing.structured_content["error"]["message"] == "image: the URL answered HTTP 404"
    assert asked == ["/big", "/small", "/nothing"]
    assert list(spools.iterdir()) == []


async def test_an_upload_that_is_not_committed_and_bad_base64_are_tool_errors(
    service: ArtifactService,
) -> None:
    session = await service.uploads.begin(
        CALLER,
        name="x.bin",
        mime_type=None,
        size=10,
        sha256=None,
        chunk_size=1 << 20,
        ttl_seconds=None,
        metadata=None,
        protocol="mcp",
    )
    async with Client(tool_server(service, [])) as client:
        pending = await client.call_tool("read_whole", {"image": {"upload_id": session.id}})
        unknown = await client.call_tool("read_whole", {"image": {"upload_id": "u_" + "z" * 24}})
        garbage = await client.call_tool("read_whole", {"image": "not base64!"})
    assert pending.structured_content is not None
    assert "not committed" in pending.structured_content["error"]["message"]
    assert unknown.structured_content is not None
    assert unknown.structured_content["error"]["code"] == "not_found"
    assert garbage.is_error
    assert "expected an artifact URI, a data: URL or base64" in garbage.content[0].text  # type: ignore[union-attr]


def test_data_urls_are_parsed_as_rfc_2397_says() -> None:
    assert parse_data_url("data:image/png;base64,AAEC") == (b"\x00\x01\x02", "image/png")
    assert parse_data_url("data:,a%20b") == (b"a b", "text/plain;charset=US-ASCII")
    assert parse_data_url("data:text/plain;charset=utf-8,Gr%C3%BC%C3%9Fe") == (
        "Grüße".encode(),
        "text/plain;charset=utf-8",
    )
    with pytest.raises(ValueError, match="needs a ','"):
        parse_data_url("data:image/png;base64")
    with pytest.raises(ValueError, match="not valid"):
        parse_data_url("data:image/png;base64,@@@")


async def test_a_file_uri_of_a_committed_upload_is_a_file_parameters_value(service: ArtifactService) -> None:
    session = await service.uploads.begin(
        CALLER,
        name="d.bin",
        mime_type=None,
        size=len(DATA),
        sha256=None,
        chunk_size=1 << 20,
        ttl_seconds=None,
        metadata=None,
        protocol="mcp",
    )

    async def body() -> AsyncIterator[bytes]:
        yield DATA

    await service.uploads.put_chunk(CALLER, session.id, 0, body())
    await service.uploads.complete(CALLER, session.id)
    async with Client(tool_server(service, [])) as client:
        result = await client.call_tool("read_whole", {"image": f"blobstore://files/{session.id}"})
        foreign = await client.call_tool("read_whole", {"image": "blobstore://files/u_" + "k" * 24})
    assert result.structured_content == {"result": len(DATA)}
    assert foreign.structured_content is not None
    assert foreign.structured_content["error"]["code"] == "not_found"


@settings(max_examples=200, deadline=None)
@given(
    data=st.binary(max_size=200),
    media=st.sampled_from(["image/png", "text/plain;charset=utf-8", "application/octet-stream", ""]),
    encoded=st.booleans(),
)
def test_a_data_url_gives_back_the_bytes_and_type_it_was_made_of(
    data: bytes, media: str, encoded: bool
) -> None:
    if encoded:
        url = f"data:{media};base64,{base64.b64encode(data).decode()}"
    else:
        url = f"data:{media},{quote_from_bytes(data, safe='')}"
    assert parse_data_url(url) == (data, media or "text/plain;charset=US-ASCII")

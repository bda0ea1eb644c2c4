"""An embedded tool with a file parameter (``examples/file_tool_server.py``), run as a real server process and
called by the official client over stdio and streamable HTTP in both protocol eras, with each form of file."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import random
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from PIL import Image

from blobstore.config import Settings
from blobstore.models import Caller
from blobstore.runtime import open_service
from tests.fixtures.ports import free_port
from tests.fixtures.server import isolated_env, stop_process
from tests.fixtures.waiting import wait_until
from tests.handles.conftest import put
from tests.handles.file_service import file_service

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "file_tool_server.py"
NAMESPACE = "default"


def png(width: int, height: int) -> bytes:
    rng = random.Random(width * height)
    out = io.BytesIO()
    Image.frombytes("RGB", (width, height), rng.randbytes(width * height * 3)).save(out, "PNG")
    return out.getvalue()


PNG = png(300, 200)
SHA = hashlib.sha256(PNG).hexdigest()


def start_http_example(
    env: dict[str, str], log: Path, example: Path = EXAMPLE
) -> tuple[subprocess.Popen[bytes], int]:
    """The example serving streamable HTTP on a free port, once it accepts connections."""
    port = free_port()
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, str(example), "--http", f"127.0.0.1:{port}"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def listening() -> bool:
        if process.poll() is not None:
            raise RuntimeError(log.read_text(errors="replace"))
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2.0).close()
        except OSError:
            return False
        return True

    try:
        wait_until(listening, within=60.0, what="the example to listen")
    except BaseException:
        stop_process(process)
        raise
    return process, port


@contextlib.asynccontextmanager
async def example_client(transport: str, env: dict[str, str], log: Path) -> AsyncIterator[Client]:
    if transport == "stdio":
        params = StdioServerParameters(command=sys.executable, args=[str(EXAMPLE)], env=env)
        async with Client(params) as client:
            yield client
        return
    process, port = start_http_example(env, log)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        async with Client(url, mode="legacy" if transport == "http-legacy" else "auto") as client:
            yield client
    finally:
        stop_process(process)


async def checksum(client: Client, image: Any) -> dict[str, Any]:
    result = await client.call_tool("checksum_image", {"image": image})
    assert result.structured_content is not None, result.content
    return dict(result.structured_content)


async def upload(client: Client, data: bytes) -> str:
    begun = await client.call_tool(
        "upload_begin", {"name": "shot.png", "mime_type": "image/png", "size": len(data)}
    )
    assert begun.structured_content is not None
    upload_id = begun.structured_content["upload_id"]
    await client.call_tool(
        "upload_chunk", {"upload_id": upload_id, "index": 0, "data": base64.b64encode(data).decode()}
    )
    committed = await client.call_tool("upload_commit", {"upload_id": upload_id})
    assert not committed.is_error, committed.content
    return str(upload_id)


@pytest.mark.parametrize("transport", ["stdio", "http-legacy", "http"])
async def test_a_file_parameter_takes_each_form_and_the_tool_gets_the_same_bytes(
    transport: str, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    async with open_service(Settings(data_dir=data_dir)) as service:
        mine = await put(service, PNG, "shot.png", "image/png", caller=Caller(namespace=NAMESPACE))
        theirs = await put(service, PNG, "theirs.png", "image/png", caller=Caller(namespace="other"))
    with file_service({"/files/file_1": PNG}) as (origin, asked):
        env = isolated_env(
            {
                "BLOBSTORE_DATA_DIR": str(data_dir),
                "BLOBSTORE_FILE_DOWNLOAD_ORIGINS": origin,
                # The stand-in file service listens on loopback, which downloads reach only when allowed.
                "BLOBSTORE_FILE_DOWNLOAD_NETWORKS": "127.0.0.0/8",
            }
        )
        async with example_client(transport, env, tmp_path / "example.log") as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            by_uri = await checksum(client, mine.uri)
            by_data_url = await checksum(client, "data:image/png;base64," + base64.b64encode(PNG).decode())
            by_base64 = await checksum(client, base64.b64encode(PNG).decode())
            by_upload = await checksum(client, {"upload_id": await upload(client, PNG)})
            by_download = await checksum(
                client, {"download_url": f"{origin}/files/file_1?sig=secret", "file_id": "file_1"}
            )
            window = await checksum(client, f"{mine.uri}?offset=0&length=100")
            foreign = await client.call_tool("checksum_image", {"image": theirs.uri})
            elsewhere = await client.call_tool(
                "checksum_image", {"image": {"download_url": "http://127.0.0.2:9/x", "file_id": "f"}}
            )
    tool = tools["checksum_image"]
    image_schema = tool.input_schema["properties"]["image"]
    assert image_schema["anyOf"][0]["x-mcp-file"] == {}
    assert "blobstore://artifacts/{id}" in image_schema["anyOf"][0]["description"]
    assert tool.meta is not None
    assert tool.meta["openai/fileParams"] == ["image"]
    for answer in (by_uri, by_data_url, by_base64, by_upload, by_download):
        assert (answer["sha256"], answer["size"], answer["width"], answer["height"]) == (
            SHA,
            len(PNG),
            300,
            200,
        )
    assert by_uri["mime_type"] == by_upload["mime_type"] == by_data_url["mime_type"] == "image/png"
    # A window URI brings that window's bytes only (the PNG's header still tells its pixel size).
    assert (window["size"], window["sha256"]) == (100, hashlib.sha256(PNG[:100]).hexdigest())
    assert asked == ["/files/file_1"]
    assert foreign.is_error
    assert foreign.structured_content is not None
    assert foreign.structured_content["error"]["code"] == "not_found"
    assert elsewhere.is_error
    assert elsewhere.structured_content is not None
    assert elsewhere.structured_content["error"]["code"] == "invalid_request"
    assert "BLOBSTORE_FILE_DOWNLOAD_ORIGINS" in elsewhere.structured_content["error"]["message"]

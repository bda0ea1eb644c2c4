"""The typed media example (``examples/media_tool_server.py``) run as a real server process and called by the
official client over stdio and streamable HTTP (in both protocol eras): each input form of a typed argument,
each refusal (the tool is not called), and a typed result."""

from __future__ import annotations

import base64
import contextlib
import io
import random
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
from tests.fixtures.server import isolated_env, stop_process
from tests.handles.conftest import put
from tests.handles.file_service import file_service
from tests.handles.test_file_params import start_http_example
from tests.handles.test_url_inputs import body, site
from tests.views import media

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "media_tool_server.py"
NAMESPACE = "default"


def png(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (30, 160, 90)).save(out, "PNG")
    return out.getvalue()


PNG = png(300, 200)
B64 = base64.b64encode(PNG).decode()


@contextlib.asynccontextmanager
async def example(transport: str, env: dict[str, str], log: Path) -> AsyncIterator[Client]:
    if transport == "stdio":
        async with Client(
            StdioServerParameters(command=sys.executable, args=[str(EXAMPLE)], env=env)
        ) as client:
            yield client
        return
    process: subprocess.Popen[bytes]
    process, port = start_http_example(env, log, EXAMPLE)
    try:
        async with Client(
            f"http://127.0.0.1:{port}/mcp", mode="legacy" if transport == "http-legacy" else "auto"
        ) as client:
            yield client
    finally:
        stop_process(process)


async def text_of(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return str(result.content[0].text)  # type: ignore[union-attr]


async def error_of(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.content
    assert result.structured_content is not None
    return dict(result.structured_content["error"])


async def upload(client: Client, data: bytes) -> str:
    begun = await client.call_tool("upload_begin", {"name": "shot.png", "size": len(data)})
    assert begun.structured_content is not None
    upload_id = str(begun.structured_content["upload_id"])
    await client.call_tool(
        "upload_chunk", {"upload_id": upload_id, "index": 0, "data": base64.b64encode(data).decode()}
    )
    committed = await client.call_tool("upload_commit", {"upload_id": upload_id})
    assert not committed.is_error, committed.content
    return upload_id


@pytest.mark.parametrize("transport", ["stdio", "http-legacy", "http"])
async def test_the_media_example_takes_every_form_refuses_before_the_call_and_returns_an_image(
    transport: str, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    noise = random.Random(7).randbytes(11 * 1024 * 1024)
    async with open_service(Settings(data_dir=data_dir)) as service:
        mine = await put(service, PNG, "shot.png", "image/png", caller=Caller(namespace=NAMESPACE))
        huge = await put(
            service, b"\x89PNG\r\n\x1a\n" + noise, "huge.png", caller=Caller(namespace=NAMESPACE)
        )
        theirs = await put(service, PNG, "theirs.png", "image/png", caller=Caller(namespace="other"))
    with (
        file_service({"/files/file_1": PNG}) as (origin, asked),
        site({"/inner.png": body(PNG)}, host="127.0.0.2") as (inner, inner_asked),
    ):
        env = isolated_env(
            {
                "BLOBSTORE_DATA_DIR": str(data_dir),
                "BLOBSTORE_FILE_DOWNLOAD_ORIGINS": f"{origin},{inner}",
                # The stand-in file service is on 127.0.0.1, allowed here; 127.0.0.2 is not.
                "BLOBSTORE_FILE_DOWNLOAD_NETWORKS": "127.0.0.1/32",
            }
        )
        async with example(transport, env, tmp_path / "example.log") as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            forms = {
                "data URL": f"data:image/png;base64,{B64}",
                "base64": B64,
                "artifact URI": mine.uri,
                "upload id": {"upload_id": await upload(client, PNG)},
                "URL": f"{origin}/files/file_1?sig=s3cr3t",
                "ChatGPT file object": {"download_url": f"{origin}/files/file_1", "file_id": "file_1"},
            }
            answers = {
                form: await text_of(client, "analyze_image", {"image": value, "question": "what colour?"})
                for form, value in forms.items()
            }
            refusals = {
                "wrong format": await error_of(
                    client, "analyze_image", {"image": base64.b64encode(media.text_pdf(1)).decode()}
                ),
                "too large": await error_of(client, "analyze_image", {"image": huge.uri}),
                "undecodable": await error_of(
                    client, "analyze_image", {"image": base64.b64encode(PNG[:-40]).decode()}
                ),
                "foreign": await error_of(client, "analyze_image", {"image": theirs.uri}),
                "loopback URL": await error_of(client, "analyze_image", {"image": f"{inner}/inner.png"}),
                "not audio": await error_of(client, "transcribe_audio", {"audio": B64}),
            }
            heard = await text_of(
                client, "transcribe_audio", {"audio": base64.b64encode(media.tone("wav", 1.0)).decode()}
            )
            made = await client.call_tool(
                "generate_image", {"prompt": "a green field", "width": 96, "height": 64}
            )
    for form, answer in answers.items():
        assert answer == "PNG, 300x200 px, 2 bytes".replace("2 bytes", f"{len(PNG)} bytes") + (
            ", dominant colour #1ea05a. Asked: what colour?"
        ), form
    assert asked == ["/files/file_1", "/files/file_1"]
    assert inner_asked == []
    assert refusals["wrong format"]["code"] == "unsupported_media"
    assert refusals["wrong format"]["formats"] == ["png", "jpeg", "webp", "gif"]
    assert "pdf" in refusals["wrong format"]["message"]
    assert (refusals["too large"]["code"], refusals["too large"]["maxBytes"]) == (
        "limit_exceeded",
        10_000_000,
    )
    assert "10 MB" in refusals["too large"]["message"]
    assert refusals["undecodable"]["code"] == "media_invalid"
    assert refusals["foreign"]["code"] == "not_found"
    assert (refusals["loopback URL"]["code"], refusals["loopback URL"]["addressClass"]) == (
        "invalid_request",
        "loopback",
    )
    assert refusals["not audio"]["code"] == "unsupported_media"
    assert refusals["not audio"]["formats"] == ["mp3", "wav", "ogg", "flac"]
    assert heard.startswith(
        "No transcript from this tool (read_artifact(uri, transcript=true) gives one). The recording: 1.0 s, "
        "44100 Hz, 2 channels"
    )
    assert [block.type for block in made.content] == ["text", "image"]
    assert made.structured_content is not None
    assert made.structured_content["result"]["name"] == "a-green-field.png"
    assert (made.structured_content["result"]["width"], made.structured_content["result"]["height"]) == (
        96,
        64,
    )
    analyze = tools["analyze_image"]
    assert analyze.input_schema["properties"]["image"]["x-blobstore-media"]["maxSizeText"] == "10 MB"
    assert "No vision model" in (analyze.description or "")
    assert "does not transcribe" in (tools["transcribe_audio"].description or "")
    assert tools["generate_image"].output_schema is not None

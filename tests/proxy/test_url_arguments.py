"""Artifact URIs at URL arguments (``[tools.X.arguments] url = "url"``): real processes, the official Python
client, an upstream (``file_args_upstream.py``) that fetches the URL it is given.

The URL is a signed ``/share`` link of a ``blobstore serve`` over the proxy's store, at
``BLOBSTORE_PUBLIC_URL`` (the proxy itself has no HTTP listener), or a presigned S3 URL when the store is on
S3 with presigned downloads on; either expires ``BLOBSTORE_S3_PRESIGN_SECONDS`` after it was made.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.types import CallToolResult, TextContent

from blobstore.config import Settings
from blobstore.models import Artifact, Caller
from blobstore.runtime import open_service
from mcp_resources.tools.binary_schema import HANDLE_HINT
from mcp_resources.tools.handles import AUDIT_ACTION
from tests.fixtures.s3 import S3Endpoint, S3Location
from tests.fixtures.server import Server, isolated_env, serving
from tests.handles.conftest import put
from tests.proxy.conftest import HERE, NAMESPACE, TIMEOUT, blobstore_command, proxy_args

UPSTREAM = HERE / "file_args_upstream.py"
DATA = os.urandom(300_000)
LIFETIME = 120
"""``BLOBSTORE_S3_PRESIGN_SECONDS`` of the proxies here."""
OURS = Caller(namespace=NAMESPACE)


async def stored(settings: Settings, data: bytes, name: str, caller: Caller = OURS) -> Artifact:
    async with open_service(settings, migrate=True) as service:
        return await put(service, data, name, "application/octet-stream", caller=caller)


def write_config(tmp_path: Path) -> Path:
    config = tmp_path / "offload.toml"
    config.write_text('[tools.fetch.arguments]\nurl = "url"\n')
    return config


def proxy(tmp_path: Path, data_dir: Path, env: dict[str, str]) -> StdioServerParameters:
    upstream = [sys.executable, str(UPSTREAM), str(tmp_path / "record.jsonl")]
    args = proxy_args(data_dir, upstream, "--offload-config", str(write_config(tmp_path)))
    variables = {"BLOBSTORE_S3_PRESIGN_SECONDS": str(LIFETIME), **env}
    return StdioServerParameters(command=blobstore_command(), args=args, env=isolated_env(variables))


def text(result: CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, TextContent))


async def fetched(client: Client, uri: str) -> tuple[dict[str, Any], float, float]:
    """What the upstream got by fetching the URL the proxy put in for ``uri``, and when the call ran."""
    before = time.time()
    result = await client.call_tool("fetch", {"url": uri})
    after = time.time()
    assert not result.is_error, text(result)
    answer: dict[str, Any] = json.loads(text(result))
    return answer, before, after


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Server]:
    with serving(tmp_path) as server:
        yield server


async def test_the_tool_fetches_the_artifact_from_a_signed_serve_url_that_expires_and_cannot_be_altered(
    tmp_path: Path, store: Server
) -> None:
    artifact = await stored(Settings(data_dir=store.data_dir), DATA, "capture.bin")
    other = await stored(Settings(data_dir=store.data_dir), b"other bytes", "other.bin")
    params = proxy(tmp_path, store.data_dir, {"BLOBSTORE_PUBLIC_URL": store.url})
    async with Client(params, mode="legacy") as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert tools["fetch"].input_schema["properties"]["url"] == {
            "type": "string",
            "format": "uri",
            "description": f"A URL; {HANDLE_HINT}",
        }
        answer, before, after = await fetched(client, artifact.uri)
    assert (answer["status"], answer["sha256"]) == (200, hashlib.sha256(DATA).hexdigest())
    url = urlsplit(answer["url"])
    assert f"{url.scheme}://{url.netloc}" == store.url
    assert url.path == f"/share/{NAMESPACE}/{artifact.id}"
    query = {key: values[0] for key, values in parse_qs(url.query).items()}
    assert set(query) == {"expires", "by", "sig"}
    # Minted by the proxy's own process, which holds no token: its lifetime and the key bound it.
    assert query["by"] == "mcp-proxy"
    assert int(before) + LIFETIME <= int(query["expires"]) <= after + LIFETIME
    later = urlencode({"expires": int(query["expires"]) + 3600, "by": query["by"], "sig": query["sig"]})
    flipped = query["sig"][:-1] + ("A" if query["sig"][-1] != "A" else "B")
    forged = [{**query, "sig": flipped}, {**query, "by": "local"}]
    altered = [
        f"{store.url}{url.path}?{later}",
        *(f"{store.url}{url.path}?{urlencode(fields)}" for fields in forged),
        f"{store.url}/share/{NAMESPACE}/{other.id}?{url.query}",
    ]
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        assert (await http.get(answer["url"])).content == DATA
        assert [(await http.get(link)).status_code for link in altered] == [403, 403, 403, 403]
    lines = [json.loads(line) for line in (store.data_dir / "audit.jsonl").read_text().splitlines()]
    resolved = [line for line in lines if line.get("action") == AUDIT_ACTION]
    assert [(line["tool"], line["argument"], line["form"], line["sha256"]) for line in resolved] == [
        ("fetch", "url", "url", artifact.sha256)
    ]
    assert query["sig"] not in (store.data_dir / "audit.jsonl").read_text()


async def test_a_window_a_foreign_and_a_guessed_handle_at_a_url_argument_are_refused(
    tmp_path: Path, store: Server
) -> None:
    ours = await stored(Settings(data_dir=store.data_dir), DATA, "capture.bin")
    theirs = await stored(Settings(data_dir=store.data_dir), DATA, "theirs.bin", Caller(namespace="other"))
    params = proxy(tmp_path, store.data_dir, {"BLOBSTORE_PUBLIC_URL": store.url})
    refused = []
    async with Client(params, mode="legacy") as client:
        for uri in (f"{ours.uri}?offset=0&length=10", theirs.uri, "blobstore://artifacts/a_" + "y" * 24):
            result = await client.call_tool("fetch", {"url": uri})
            assert result.is_error
            assert result.structured_content is not None
            refused.append(result.structured_content["error"]["code"])
    assert refused == ["invalid_request", "not_found", "not_found"]
    assert not (tmp_path / "record.jsonl").exists()


def test_a_url_argument_without_a_public_url_stops_the_proxy_before_it_starts_the_upstream(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "upstream-started"
    upstream = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    config = write_config(tmp_path)
    args = proxy_args(tmp_path / "data", upstream, "--offload-config", str(config))
    done = subprocess.run(
        [blobstore_command(), *args],
        env=isolated_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"blobstore: {config}: tools.fetch.arguments.url: ")
    assert "BLOBSTORE_PUBLIC_URL" in line
    assert not marker.exists()


@pytest.mark.s3
async def test_on_s3_with_presigned_downloads_the_tool_fetches_a_presigned_url(
    tmp_path: Path, s3_endpoint: S3Endpoint, s3_location: S3Location
) -> None:
    env = {
        "BLOBSTORE_STORAGE_URL": s3_location.url,
        "BLOBSTORE_S3_ENDPOINT_URL": s3_endpoint.endpoint_url,
        "BLOBSTORE_S3_PRESIGN_DOWNLOADS": "true",
    }
    data_dir = tmp_path / "data"
    settings = Settings(
        data_dir=data_dir,
        storage_url=s3_location.url,
        s3_endpoint_url=s3_endpoint.endpoint_url,
    )
    artifact = await stored(settings, DATA, "capture.bin")
    async with Client(proxy(tmp_path, data_dir, env), mode="legacy") as client:
        answer, _before, _after = await fetched(client, artifact.uri)
    assert (answer["status"], answer["sha256"]) == (200, hashlib.sha256(DATA).hexdigest())
    url = urlsplit(answer["url"])
    assert f"{url.scheme}://{url.netloc}" == s3_endpoint.endpoint_url
    assert parse_qs(url.query)["X-Amz-Expires"] == [str(LIFETIME)]

"""SEP-2631 on ``blobstore serve``'s /mcp: authorize an upload with the official client's raw request API,
send the bytes with curl to the signed target, find the artifact; authorize its download, fetch it with
curl."""

from __future__ import annotations

import base64
import hashlib
import json
import random
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import Request, RequestParams
from pydantic import BaseModel, ConfigDict

from blobstore.config import Settings
from blobstore.models import Caller
from blobstore.runtime import open_service
from tests.fixtures.commands import run_cli
from tests.fixtures.server import Server, isolated_env, serving

DATA = random.Random(26).randbytes(3 * 1024 * 1024 + 17)
SHA = hashlib.sha256(DATA).hexdigest()
SHA_B64URL = base64.urlsafe_b64encode(hashlib.sha256(DATA).digest()).rstrip(b"=").decode()


@pytest.fixture(scope="module")
def files_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("files")
    with serving(root, env={"BLOBSTORE_MCP_FILES_CAPABILITY": "experimental"}) as server:
        yield server


class RawParams(RequestParams):
    """Params as given: the raw request API sends every field."""

    model_config = ConfigDict(extra="allow")


class Answer(BaseModel):
    """The result as it came (its fields are the draft's, not the SDK's)."""

    model_config = ConfigDict(extra="allow")


async def ask(client: Client, method: str, params: dict[str, Any]) -> dict[str, Any]:
    answer = await client.session.send_request(Request(method=method, params=RawParams(**params)), Answer)
    return answer.model_dump()


def curl(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["curl", "-sS", "--fail-with-body", *args], capture_output=True, check=False)


def status(method: str, *args: str) -> bytes:
    """The HTTP status curl got for ``method`` with ``args``."""
    answer = subprocess.run(
        ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-X", method, *args], capture_output=True
    )
    return answer.stdout


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_an_authorized_upload_sent_with_curl_becomes_the_artifact_and_downloads_again(
    files_server: Server, tmp_path: Path, mode: str
) -> None:
    source = tmp_path / "report.bin"
    source.write_bytes(DATA)
    async with Client(f"{files_server.url}/mcp", mode=mode) as client:
        advertised = client.server_capabilities.experimental
        authorized = await ask(
            client,
            "files/authorizeUpload",
            {
                "name": "report.bin",
                "mimeType": "application/octet-stream",
                "size": len(DATA),
                "digest": {"algorithm": "sha-256", "value": SHA_B64URL},
            },
        )
        upload = authorized["upload"]
        headers = [arg for name, value in upload["headers"].items() for arg in ("-H", f"{name}: {value}")]
        sent = curl("-X", upload["method"], *headers, "--data-binary", f"@{source}", upload["url"])
        download = await ask(client, "files/authorizeDownload", {"uri": authorized["file"]["uri"]})
    assert advertised is not None
    assert advertised["files"] == {"upload": True, "download": True, "transports": ["https"]}
    assert authorized["file"]["uri"].startswith("blobstore://files/u_")
    assert authorized["file"]["digest"] == {"algorithm": "sha-256", "value": SHA_B64URL}
    assert upload["method"] == "PATCH"
    assert upload["url"].startswith(f"{files_server.url}/tus/")
    assert sent.returncode == 0, sent.stderr + sent.stdout
    file = download["file"]
    assert (file["size"], file["digest"]["value"], file["name"]) == (len(DATA), SHA_B64URL, "report.bin")
    fetched = tmp_path / "fetched.bin"
    got = curl("-o", str(fetched), download["download"]["url"])
    assert got.returncode == 0, got.stderr
    assert hashlib.sha256(fetched.read_bytes()).hexdigest() == SHA
    async with open_service(Settings(data_dir=files_server.data_dir)) as service:
        listed = await service.list_artifacts(Caller(namespace="default"))
    assert SHA in {artifact.sha256 for artifact in listed.items}


async def test_a_tampered_or_foreign_upload_target_is_refused(files_server: Server, tmp_path: Path) -> None:
    async with Client(f"{files_server.url}/mcp", mode="legacy") as client:
        authorized = await ask(client, "files/authorizeUpload", {"name": "x.bin", "size": 4})
        with pytest.raises(MCPError) as caught:
            await ask(
                client,
                "files/authorizeUpload",
                {"name": "x.bin", "size": 4, "digest": {"algorithm": "md5", "value": "AAAA"}},
            )
        with pytest.raises(MCPError) as missing:
            await ask(client, "files/authorizeDownload", {"uri": "blobstore://artifacts/a_" + "q" * 24})
    upload = authorized["upload"]
    headers = [arg for name, value in upload["headers"].items() for arg in ("-H", f"{name}: {value}")]
    other_namespace = upload["url"].replace("ns=default", "ns=other")
    forged = upload["url"][:-3] + ("AAA" if not upload["url"].endswith("AAA") else "BBB")
    for url in (other_namespace, forged):
        assert status("PATCH", *headers, "--data-binary", "abcd", url) == b"403"
    assert caught.value.code == -32602
    assert caught.value.data["reason"] == "invalid_request"
    assert missing.value.code == -32602
    assert missing.value.data["reason"] == "not_found"


async def test_the_capability_is_off_by_default(tmp_path: Path) -> None:
    with serving(tmp_path) as server:
        async with Client(f"{server.url}/mcp", mode="legacy") as client:
            assert "files" not in (client.server_capabilities.experimental or {})
            with pytest.raises(MCPError) as caught:
                await ask(client, "files/authorizeUpload", {"name": "x.bin", "size": 4})
    assert caught.value.code == -32601


async def test_with_tokens_the_signed_target_needs_none_and_lands_in_the_tokens_namespace(
    tmp_path: Path,
) -> None:
    created = run_cli(
        ["token", "create", "--namespace", "tenant", "--scopes", "read,write", "--json"],
        isolated_env({"BLOBSTORE_DATA_DIR": str(tmp_path / "data")}),
    )
    assert created.returncode == 0, created.stderr
    token = json.loads(created.stdout)["token"]
    source = tmp_path / "small.bin"
    source.write_bytes(DATA[:1000])
    with serving(tmp_path, env={"BLOBSTORE_MCP_FILES_CAPABILITY": "experimental"}) as server:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
            Client(streamable_http_client(f"{server.url}/mcp", http_client=http), mode="legacy") as client,
        ):
            authorized = await ask(client, "files/authorizeUpload", {"name": "small.bin", "size": 1000})
        upload = authorized["upload"]
        headers = [arg for name, value in upload["headers"].items() for arg in ("-H", f"{name}: {value}")]
        unsigned = upload["url"].partition("?")[0]
        without = status("PATCH", *headers, "--data-binary", "x", unsigned)
        sent = curl("-X", "PATCH", *headers, "--data-binary", f"@{source}", upload["url"])
    assert "ns=tenant" in upload["url"]
    assert without == b"401"
    assert sent.returncode == 0, sent.stderr + sent.stdout
    async with open_service(Settings(data_dir=tmp_path / "data")) as service:
        listed = await service.list_artifacts(Caller(namespace="tenant"))
    assert [artifact.sha256 for artifact in listed.items] == [hashlib.sha256(DATA[:1000]).hexdigest()]

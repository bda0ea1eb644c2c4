"""Off-the-shelf tus clients against a real ``blobstore serve``: tuspy (Python) and tus-js-client (Node)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
from tusclient import client as tus_client

from tests.e2e import docs_examples
from tests.fixtures.server import Server
from tests.tus.conftest import TUS, KiB, MiB

JS_DIR = Path(__file__).parent / "js"
NODE = shutil.which("node")
NPM = shutil.which("npm")


def write_file(path: Path, size: int) -> bytes:
    data = os.urandom(size)
    path.write_bytes(data)
    return data


def artifact_bytes(server: Server, upload_url: str) -> tuple[str, bytes]:
    """The finished upload's artifact id (from HEAD) and the artifact's content."""
    head = httpx.head(upload_url, headers=TUS)
    assert head.status_code == 200, head.text
    artifact_id = head.headers["blobstore-artifact-id"]
    content = httpx.get(f"{server.url}/v1/artifacts/{artifact_id}/content", timeout=60)
    assert content.status_code == 200
    return artifact_id, content.content


def test_tuspy_uploads_8_mib_in_3_mib_chunks(live_server: Server, tmp_path: Path) -> None:
    data = write_file(tmp_path / "eight.bin", 8 * MiB)
    with (tmp_path / "eight.bin").open("rb") as stream:
        uploader = tus_client.TusClient(f"{live_server.url}/tus/").uploader(
            file_stream=stream, chunk_size=3 * MiB, metadata={"filename": "eight.bin"}
        )
        uploader.upload()

    assert uploader.url is not None
    artifact_id, content = artifact_bytes(live_server, uploader.url)
    assert content == data
    info = httpx.get(f"{live_server.url}/v1/artifacts/{artifact_id}").json()
    assert info["sha256"] == hashlib.sha256(data).hexdigest()
    assert info["name"] == "eight.bin"


def test_tuspy_resumes_an_interrupted_upload_from_its_url(live_server: Server, tmp_path: Path) -> None:
    path = tmp_path / "resume.bin"
    data = write_file(path, 8 * MiB + 5)
    client = tus_client.TusClient(f"{live_server.url}/tus/")
    with path.open("rb") as stream:
        first = client.uploader(file_stream=stream, chunk_size=3 * MiB, upload_checksum=True)
        first.upload(stop_at=4 * MiB + 1)  # the first attempt ends mid-file, off any chunk boundary
    assert first.url is not None
    assert httpx.head(first.url, headers=TUS).headers["upload-offset"] == str(4 * MiB + 1)

    # A new process that kept only the upload URL (what tuspy's url_storage keeps).
    with path.open("rb") as stream:
        second = client.uploader(file_stream=stream, url=first.url, chunk_size=3 * MiB, upload_checksum=True)
        assert second.offset == 4 * MiB + 1  # asked the server where to go on
        second.upload()

    _, content = artifact_bytes(live_server, first.url)
    assert content == data


@pytest.fixture(scope="session")
def tus_js() -> Path:
    if NODE is None or NPM is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("node and npm are needed for tus-js-client")  # CI must not silently shrink the run
        pytest.skip("node and npm are needed for tus-js-client")
    if not (JS_DIR / "node_modules" / "tus-js-client").is_dir():
        subprocess.run([NPM, "ci", "--no-audit", "--no-fund"], cwd=JS_DIR, check=True, capture_output=True)
    return JS_DIR / "upload.mjs"


@pytest.mark.parametrize("chunk_size", [777 * KiB, 3 * MiB + 1])
def test_tus_js_client_uploads_with_its_chunk_size(
    live_server: Server, tmp_path: Path, tus_js: Path, chunk_size: int
) -> None:
    path = tmp_path / "js.bin"
    data = write_file(path, 5 * MiB + 3)

    done = subprocess.run(
        [str(NODE), str(tus_js), f"{live_server.url}/tus/", str(path), str(chunk_size)],
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stderr
    patches, upload_url = done.stdout.strip().splitlines()[-2:]
    assert patches == f"patches={-(-len(data) // chunk_size)}"  # the client's own odd-sized PATCHes
    assert upload_url.startswith(f"{live_server.url}/tus/u_")
    artifact_id, content = artifact_bytes(live_server, upload_url)
    assert content == data
    info = httpx.get(f"{live_server.url}/v1/artifacts/{artifact_id}").json()
    assert info["sha256"] == hashlib.sha256(data).hexdigest()
    assert info["name"] == "js.bin"


def test_the_curl_example_in_the_docs_uploads_hello_world(live_server: Server, tmp_path: Path) -> None:
    result = docs_examples.run(docs_examples.block("$B/tus/"), tmp_path, B=live_server.url)

    found = re.search(
        r"^blobstore-artifact-id: (\S+)\r?$", result.stdout.decode(), re.IGNORECASE | re.MULTILINE
    )
    assert found is not None, result.stdout.decode()
    content = httpx.get(f"{live_server.url}/v1/artifacts/{found.group(1)}/content")
    assert content.content == b"hello world"
    info = httpx.get(f"{live_server.url}/v1/artifacts/{found.group(1)}").json()
    assert (info["name"], info["mime_type"]) == ("hello.txt", "text/plain")

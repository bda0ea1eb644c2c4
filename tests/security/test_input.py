"""Hostile input: ids, names and digests are validated before any filesystem call; malformed JSON, headers
and multipart bodies are 4xx, never 5xx; names are escaped in Content-Disposition; MIME types are checked."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx
import pytest

import blobstore.storage.local as local_backend
import blobstore.storage.local_files as local_files_backend
from blobstore.api import create_app
from blobstore.runtime import open_service
from blobstore.service import ArtifactService
from tests.fixtures.asgi import app_client
from tests.fixtures.settings import make_settings
from tests.security.conftest import BASE

HOSTILE_IDS = [
    "..",
    "..%2F..%2Fetc%2Fpasswd",
    "%2Fetc%2Fpasswd",
    "a_..%2F..%2F..%2F..%2Ftmp",
    "a_AAAAAAAAAAAAAAAAAAAAAAAA%00",
    "u_%2e%2e%2f%2e%2e%2fstaging",
    "a_" + "A" * 500,
    "sha256:..%2F..",
    "%E2%80%AE",
    "a_AAAAAAAAAAAAAAAAAAAAAAAA%0d%0aSet-Cookie:x",
]


class RecordingOs:
    """``os`` for the local backend's modules that records every path it is handed."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    def __getattr__(self, name: str) -> Any:
        real = getattr(os, name)
        if not callable(real):
            return real

        def call(*args: Any, **kwargs: Any) -> Any:
            self.paths += [os.fspath(a) for a in args if isinstance(a, str | Path)]
            return real(*args, **kwargs)

        return call


@pytest.fixture
async def disk(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, ArtifactService]]:
    settings = make_settings(tmp_path, storage_url=(tmp_path / "blobs").as_uri())
    async with open_service(settings) as service:
        app = create_app(settings, service=service)
        async with app_client(app, BASE) as http:
            yield http, service


@pytest.fixture
def os_spy(monkeypatch: pytest.MonkeyPatch) -> RecordingOs:
    """The ``os`` module of the local storage backend, recording the paths it is given."""
    spy = RecordingOs()
    monkeypatch.setattr(local_backend, "os", spy)
    monkeypatch.setattr(local_files_backend, "os", spy)
    return spy


@pytest.mark.parametrize("hostile", HOSTILE_IDS)
async def test_hostile_ids_are_not_found_before_any_filesystem_call(
    disk: tuple[httpx.AsyncClient, ArtifactService], os_spy: RecordingOs, hostile: str
) -> None:
    http, _service = disk
    calls: list[tuple[str, str, dict[str, Any]]] = [
        ("GET", f"/v1/artifacts/{hostile}", {}),
        ("GET", f"/v1/artifacts/{hostile}/content", {}),
        ("DELETE", f"/v1/artifacts/{hostile}", {}),
        ("PATCH", f"/v1/artifacts/{hostile}", {"json": {"pinned": True}}),
        ("GET", f"/v1/uploads/{hostile}", {}),
        ("PUT", f"/v1/uploads/{hostile}/chunks/0", {"content": b"x"}),
        ("POST", f"/v1/uploads/{hostile}/complete", {"json": {}}),
        ("DELETE", f"/v1/uploads/{hostile}", {}),
    ]
    for method, url, kwargs in calls:
        response = await http.request(method, url, **kwargs)
        assert response.status_code in {400, 404, 405}, (method, url, response.status_code)
    assert os_spy.paths == []


@pytest.mark.parametrize(
    "digest",
    [
        "sha256:../../etc/passwd",
        "../" * 20,
        "a" * 63,
        "a" * 65,
        "g" * 64,
        "sha256:" + "0" * 63 + "\x00",
    ],
)
async def test_hostile_digests_are_refused_before_storage(
    disk: tuple[httpx.AsyncClient, ArtifactService], os_spy: RecordingOs, digest: str
) -> None:
    http, _service = disk
    upload = await http.post("/v1/uploads", json={"name": "d.bin", "sha256": digest})
    single = await http.post("/v1/artifacts", params={"name": "d.bin", "sha256": digest}, content=b"bytes")
    assert upload.status_code == 400, upload.text
    assert single.status_code in {400, 422}, single.text
    assert not any(".." in path or "\x00" in path for path in os_spy.paths)


@pytest.mark.parametrize(
    "body",
    [
        b"{",
        b"[]",
        b"null",
        b'"a string"',
        b"\xff\xfe\x00{",
        b'{"name": 1}',
        b'{"name": "x", "size": -1}',
        b'{"name": "x", "size": 1e400}',
        b'{"name": "x", "chunk_size": "big"}',
        b'{"name": "x", "unknown": [' + b"[" * 5000 + b"]" * 5000 + b"]}",
        b'{"name": "\\ud800"}',
        b'{"name": "a\\u0000b"}',
        b'{"name": "x", "metadata": "not an object"}',
    ],
)
async def test_malformed_json_is_a_4xx_problem(
    disk: tuple[httpx.AsyncClient, ArtifactService], body: bytes
) -> None:
    http, _service = disk
    response = await http.post("/v1/uploads", content=body, headers={"Content-Type": "application/json"})
    assert 400 <= response.status_code < 500, (body[:40], response.status_code, response.text)
    assert response.headers["content-type"] == "application/problem+json"


@pytest.mark.parametrize(
    "headers",
    [
        {"Range": "bytes=abc"},
        {"Range": "bytes=5-1"},
        {"Range": "bytes=0-99999999999999999999999999999999"},
        {"Range": "bytes=" + ",".join(f"{i}-{i}" for i in range(5000))},
        {"Range": "lines=1-2"},
        {"If-None-Match": '"unterminated'},
        {"If-Modified-Since": "not a date"},
        {"If-Range": "W/garbage"},
    ],
)
async def test_malformed_download_headers_never_fail_with_5xx(
    disk: tuple[httpx.AsyncClient, ArtifactService], headers: dict[str, str]
) -> None:
    http, _service = disk
    stored = await http.post("/v1/artifacts", params={"name": "h.bin"}, content=b"0123456789")
    response = await http.get(f"/v1/artifacts/{stored.json()['id']}/content", headers=headers)
    assert response.status_code in {200, 206, 304, 400, 416}, response.text


@pytest.mark.parametrize(
    "headers",
    [
        {"Content-Digest": "sha-256=:not base64!:"},
        {"Content-Digest": "sha-256=:AAAA:"},
        {"Content-Digest": "sha-256=" + "x" * 5000},
        {"X-Chunk-XXH3": "zz"},
        {"X-Chunk-XXH3": "0" * 500},
    ],
)
async def test_malformed_chunk_headers_are_400(
    disk: tuple[httpx.AsyncClient, ArtifactService], headers: dict[str, str]
) -> None:
    http, _service = disk
    begun = await http.post("/v1/uploads", json={"name": "c.bin", "chunk_size": 1024})
    response = await http.put(
        f"/v1/uploads/{begun.json()['upload_id']}/chunks/0", content=b"abc", headers=headers
    )
    assert response.status_code == 400, response.text


async def test_a_non_numeric_content_length_is_400(disk: tuple[httpx.AsyncClient, ArtifactService]) -> None:
    http, _service = disk
    request = http.build_request("POST", "/v1/artifacts", params={"name": "x"}, content=b"abc")
    request.headers["Content-Length"] = "1e3"
    response = await http.send(request)
    assert response.status_code == 400


MULTIPART_BODIES = [
    ("multipart/form-data", b"--x\r\n"),
    ("multipart/form-data; boundary=x", b"garbage without boundary"),
    ("multipart/form-data; boundary=x", b'--x\r\nContent-Disposition: form-data; name="file"\r\n\r\nabc'),
    ("multipart/form-data; boundary=x", b"--x\r\nContent-Disposition: form-data\r\n\r\nabc\r\n--x--\r\n"),
    (
        "multipart/form-data; boundary=x",
        '--x\r\nContent-Disposition: form-data; name="n\u00e4me\u732f"\r\n\r\nv\r\n--x--\r\n'.encode(),
    ),
    (
        "multipart/form-data; boundary=x",
        b'--x\r\nContent-Disposition: form-data; name="name"\r\n\r\n\xff\xfe\r\n--x--\r\n',
    ),
    ("multipart/form-data; boundary=x", b"--x\r\nX-Big: " + b"h" * 20000 + b"\r\n\r\nv\r\n--x--\r\n"),
    (
        "multipart/form-data; boundary=x",
        b'--x\r\nContent-Disposition: form-data; name="file"; filename="a"\r\n\r\nabc\r\n'
        b'--x\r\nContent-Disposition: form-data; name="name"\r\n\r\nlate\r\n--x--\r\n',
    ),
    ("multipart/form-data; boundary=" + "b" * 300, b"--b\r\n"),
    ("multipart/mixed; boundary=x", b"--x--\r\n"),
]


@pytest.mark.parametrize(("content_type", "body"), MULTIPART_BODIES)
async def test_malformed_multipart_bodies_are_400(
    disk: tuple[httpx.AsyncClient, ArtifactService], content_type: str, body: bytes
) -> None:
    http, service = disk
    response = await http.post("/v1/artifacts", content=body, headers={"Content-Type": content_type})
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "invalid_request"
    objects = [item async for item in service.blobs.iter_objects()]
    assert objects == []


@pytest.mark.parametrize(
    "name",
    ['quote".txt', "back\\slash.txt", "semi;colon=x.txt", "ünïcødé ✓.pdf", "../../etc/passwd", "tab\there"],
)
async def test_names_are_escaped_in_content_disposition(
    disk: tuple[httpx.AsyncClient, ArtifactService], name: str
) -> None:
    http, _service = disk
    stored = await http.post("/v1/artifacts", params={"name": name}, content=b"x")
    if "\t" in name:
        assert stored.status_code == 400  # control characters never become part of a name
        return
    assert stored.status_code == 201
    header = (await http.get(f"/v1/artifacts/{stored.json()['id']}/content")).headers["content-disposition"]
    assert "\r" not in header
    assert "\n" not in header
    plain, _, extended = header.partition("; filename*=UTF-8''")
    assert unquote(extended) == name  # RFC 8187 filename* carries the exact name back
    fallback = plain.removeprefix('attachment; filename="').removesuffix('"')
    assert "/" not in fallback
    assert "\\\\" not in fallback
    assert all(32 <= ord(ch) < 127 for ch in fallback)
    assert '"' not in fallback.replace('\\"', "")  # every quote is escaped


@pytest.mark.parametrize("name", ["line\r\nSet-Cookie: a=b", "nul\x00byte", "", "x" * 1025])
async def test_names_with_control_characters_or_bad_length_are_refused(
    disk: tuple[httpx.AsyncClient, ArtifactService], name: str
) -> None:
    http, _service = disk
    response = await http.post("/v1/uploads", json={"name": name})
    assert response.status_code == 400


@pytest.mark.parametrize(
    "mime", ["text/html\r\nX-Injected: 1", "not a mime", "a/b/c", "text/", "/plain", "t\x00/x"]
)
async def test_invalid_mime_types_are_refused(
    disk: tuple[httpx.AsyncClient, ArtifactService], mime: str
) -> None:
    http, _service = disk
    assert (await http.post("/v1/uploads", json={"name": "m", "mime_type": mime})).status_code == 400
    single = await http.post("/v1/artifacts", params={"name": "m", "mime_type": mime}, content=b"x")
    assert single.status_code == 400


async def test_mime_parameters_are_dropped_and_the_type_lowercased(
    disk: tuple[httpx.AsyncClient, ArtifactService],
) -> None:
    http, _service = disk
    stored = await http.post(
        "/v1/artifacts", params={"name": "t.txt", "mime_type": "Text/Plain; charset=UTF-8"}, content=b"hello"
    )
    assert stored.json()["mime_type"] == "text/plain"

"""The plain upload route answers every ``POST /v1/artifacts`` as the FastAPI endpoint it shadows would.

Two apps over one service: the app as built, and the same app without :class:`UploadRoute`, so that the
FastAPI endpoint (parameter validation by FastAPI, dependencies) answers. Each request goes to both, and the
answers must agree on status, problem body, headers and stored artifact; the audit and access lines too.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from starlette.routing import Match

from blobstore.api import create_app
from blobstore.api.routes.artifacts import UploadRoute
from blobstore.auth import create_token
from blobstore.digests import sha256_hex
from blobstore.models import Scope
from blobstore.runtime import open_service
from blobstore.service import ArtifactService
from tests.fixtures.asgi import app_client
from tests.fixtures.settings import make_settings

PAGE = "https://page.example"
_VARYING = {"id", "uri", "created_at", "expires_at", "content_url", "resource_link"}
_HEADERS = (
    "content-type",
    "www-authenticate",
    "allow",
    "access-control-allow-origin",
    "access-control-expose-headers",
    "vary",
)


@dataclass
class Pair:
    lean: httpx.AsyncClient
    plain: httpx.AsyncClient
    service: ArtifactService
    writer: str
    reader: str


@pytest.fixture
async def pair(tmp_path: Path) -> AsyncIterator[Pair]:
    settings = make_settings(tmp_path, cors_origins=PAGE, namespace_quota_bytes=6000, max_artifact_size=5000)
    async with open_service(settings, server=False) as service:
        writer = await create_token(service.repo, namespace="team", scopes=frozenset({Scope.WRITE}))
        reader = await create_token(service.repo, namespace="team", scopes=frozenset({Scope.READ}))
        lean_app = create_app(settings, service=service)
        plain_app = create_app(settings, service=service)
        assert any(isinstance(route, UploadRoute) for route in lean_app.router.routes)
        plain_app.router.routes[:] = [r for r in plain_app.router.routes if not isinstance(r, UploadRoute)]
        async with app_client(lean_app) as lean, app_client(plain_app) as plain:
            yield Pair(lean, plain, service, writer.token, reader.token)


def comparable(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    if response.headers["content-type"] == "application/problem+json":
        body.pop("request_id")
    else:
        body = {key: value for key, value in body.items() if key not in _VARYING}
        assert response.headers["location"] == f"/v1/artifacts/{response.json()['id']}"
    return {
        "status": response.status_code,
        "body": body,
        "headers": {name: response.headers.get(name) for name in _HEADERS},
        "has_request_id": "x-request-id" in response.headers,
    }


def multipart(boundary: str, fields: dict[str, str], data: bytes, filename: str = "f.txt") -> bytes:
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{key}"\r\n\r\n{value}\r\n'.encode()
        for key, value in fields.items()
    ]
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\n'
        "Content-Type: text/plain\r\n\r\n".encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    return b"".join(parts)


_DATA = b"one kilobyte of bytes " * 46
_BOUNDARY = "xYzBoundary"

CASES: dict[str, tuple[dict[str, str], dict[str, str], bytes]] = {
    # name: (query, headers, body); "W"/"R" in the Authorization header stand for the writer's/reader's token
    "raw": ({"name": "a.bin", "ttl_seconds": "60"}, {"Authorization": "W"}, _DATA),
    "raw, sniffed text": ({"name": "notes.txt"}, {"Authorization": "W", "Content-Type": "text/plain"}, _DATA),
    "raw, default name": ({}, {"Authorization": "W"}, _DATA),
    "no token": ({"name": "a.bin"}, {}, _DATA),
    "no token and a bad ttl": ({"ttl_seconds": "0"}, {}, _DATA),
    "bad token": ({"name": "a.bin"}, {"Authorization": "Bearer nope"}, _DATA),
    "read-only token": ({"name": "a.bin"}, {"Authorization": "R"}, _DATA),
    "ttl zero": ({"ttl_seconds": "0"}, {"Authorization": "W"}, _DATA),
    "ttl negative": ({"ttl_seconds": "-5"}, {"Authorization": "W"}, _DATA),
    "ttl not a number": ({"ttl_seconds": "soon"}, {"Authorization": "W"}, _DATA),
    "ttl empty": ({"ttl_seconds": ""}, {"Authorization": "W"}, _DATA),
    "ttl fractional": ({"ttl_seconds": "1.5"}, {"Authorization": "W"}, _DATA),
    "ttl above the maximum": ({"ttl_seconds": str(10**12)}, {"Authorization": "W"}, _DATA),
    "bad name": ({"name": "a/../b"}, {"Authorization": "W"}, _DATA),
    "bad mime type": ({"mime_type": "not a type"}, {"Authorization": "W"}, _DATA),
    "sha256 matches": ({"sha256": sha256_hex(_DATA)}, {"Authorization": "W"}, _DATA),
    "sha256 differs": ({"sha256": "0" * 64}, {"Authorization": "W"}, _DATA),
    "sha256 malformed": ({"sha256": "xyz"}, {"Authorization": "W"}, _DATA),
    "digest header disagrees": (
        {"sha256": sha256_hex(_DATA)},
        {"Authorization": "W", "Content-Digest": "sha-256=:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=:"},
        _DATA,
    ),
    "too large": ({}, {"Authorization": "W"}, b"x" * 5001),
    "over the quota": ({}, {"Authorization": "W"}, b"q" * 4000),
    "multipart": (
        {"ttl_seconds": "30"},
        {"Authorization": "W", "Content-Type": f"multipart/form-data; boundary={_BOUNDARY}"},
        multipart(_BOUNDARY, {"name": "form.txt", "ttl_seconds": "90"}, _DATA),
    ),
    "multipart, bad query ttl": (
        {"ttl_seconds": "x"},
        {"Authorization": "W", "Content-Type": f"multipart/form-data; boundary={_BOUNDARY}"},
        multipart(_BOUNDARY, {"name": "form.txt"}, _DATA),
    ),
    "multipart without a boundary": (
        {},
        {"Authorization": "W", "Content-Type": "multipart/form-data"},
        _DATA,
    ),
    "from a page": ({"name": "a.bin"}, {"Authorization": "W", "Origin": PAGE}, _DATA),
    "from a page, no token": ({"name": "a.bin"}, {"Origin": PAGE}, _DATA),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_the_plain_upload_route_answers_as_the_fastapi_endpoint(pair: Pair, case: str) -> None:
    query, headers, body = CASES[case]
    tokens = {"W": f"Bearer {pair.writer}", "R": f"Bearer {pair.reader}"}
    headers = {key: tokens.get(value, value) for key, value in headers.items()}
    answers = []
    for client in (pair.lean, pair.plain):
        response = await client.post("/v1/artifacts", params=query, headers=headers, content=body)
        answers.append(comparable(response))
        if response.status_code == 201:
            # Each side's artifact is removed again, so that both see the same quota.
            deleted = await client.delete(
                f"/v1/artifacts/{response.json()['id']}", headers={"Authorization": f"Bearer {pair.writer}"}
            )
            assert deleted.status_code == 204
    assert answers[0] == answers[1]


async def test_the_upload_route_writes_the_same_audit_and_access_lines(
    pair: Pair, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    access = logging.getLogger("blobstore.access")
    monkeypatch.setattr(access, "propagate", True)
    monkeypatch.setattr(access, "disabled", False)
    caplog.set_level(logging.DEBUG, logger="blobstore.access")
    audit_file = pair.service.settings.audit_log
    assert audit_file is not None
    auth = {"Authorization": f"Bearer {pair.writer}"}
    for client in (pair.lean, pair.plain):
        for query, status in (("name=a.bin", 201), ("ttl_seconds=0", 400)):
            response = await client.post(f"/v1/artifacts?{query}", headers=auth, content=_DATA)
            assert response.status_code == status
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "blobstore.access"]
    shapes = [(line["method"], line["route"], line["status"], line["bytes_in"]) for line in lines]
    # The refused body is read and dropped before the answer too (blobstore.api.guard): it counts as received.
    assert (
        shapes == [("POST", "/v1/artifacts", 201, len(_DATA)), ("POST", "/v1/artifacts", 400, len(_DATA))] * 2
    )
    audit = [json.loads(line) for line in (await anyio.Path(audit_file).read_text()).splitlines()]
    uploads = [(line["action"], line["result"], line["size"]) for line in audit if line["action"] == "upload"]
    assert uploads == [("upload", "ok", len(_DATA))] * 2


def test_the_upload_route_takes_post_of_the_collection_only() -> None:
    route = UploadRoute()
    for method, path, taken in [
        ("POST", "/v1/artifacts", True),
        ("GET", "/v1/artifacts", False),
        ("PUT", "/v1/artifacts", False),
        ("POST", "/v1/artifacts/", False),
        ("POST", "/v1/uploads", False),
    ]:
        match, child = route.matches({"type": "http", "path": path, "method": method, "root_path": ""})
        assert (match is Match.FULL) is taken, (method, path)
        assert (child.get("route") is route) is taken


async def test_other_methods_of_the_collection_still_reach_their_routes(pair: Pair) -> None:
    auth = {"Authorization": f"Bearer {pair.reader}"}
    listed = await pair.lean.get("/v1/artifacts", headers=auth)
    assert listed.status_code == 200
    assert listed.json() == {"items": [], "next_cursor": None}
    refused = await pair.lean.put("/v1/artifacts", headers=auth, content=b"x")
    assert refused.status_code == 405
    assert refused.headers["allow"] == (await pair.plain.put("/v1/artifacts", headers=auth)).headers["allow"]

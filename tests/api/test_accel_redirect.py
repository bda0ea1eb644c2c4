"""Whole-content downloads left to nginx (``BLOBSTORE_ACCEL_REDIRECT``): which answers say
``X-Accel-Redirect``, what they carry, and which stay with the server. nginx itself in front of a real server:
``tests/deploy/test_behind_nginx.py``."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from blobstore.api import create_app
from blobstore.cli import main
from blobstore.cli import serve as serve_module
from blobstore.config import Settings, SettingsError, load_settings
from blobstore.runtime import open_service
from tests.deploy.nginx import PASSED_ON
from tests.fixtures.asgi import app_client
from tests.fixtures.settings import make_settings

DATA = os.urandom(10_000)
PREFIX = "/_blobstore/"
FROM_NGINX = {"X-Sendfile-Type": "X-Accel-Redirect"}


def disk_settings(tmp_path: Path, **overrides: Any) -> Settings:
    return make_settings(tmp_path, storage_url=(tmp_path / "blobs").as_uri(), **overrides)


async def stored_client(settings: Settings) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    async with open_service(settings) as service, app_client(create_app(settings, service=service)) as http:
        created = await http.post("/v1/artifacts", params={"name": "report.pdf"}, content=DATA)
        assert created.status_code == 201, created.text
        yield http, f"/v1/artifacts/{created.json()['id']}/content"


@pytest.fixture
async def accel(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    async for pair in stored_client(disk_settings(tmp_path, accel_redirect=PREFIX)):
        yield pair


def audit_lines(tmp_path: Path) -> list[dict[str, Any]]:
    settings = make_settings(tmp_path)
    assert settings.audit_log is not None
    return [json.loads(line) for line in settings.audit_log.read_text().splitlines()]


async def test_a_whole_download_through_nginx_names_the_blob_file_and_sends_no_body(
    tmp_path: Path, accel: tuple[httpx.AsyncClient, str]
) -> None:
    http, url = accel
    direct = await http.get(url)
    response = await http.get(url, headers=FROM_NGINX)
    assert response.status_code == 200
    assert response.content == b""
    assert response.headers["content-length"] == "0"
    location = response.headers["x-accel-redirect"]
    assert location.startswith(f"{PREFIX}blobs/")
    # The location is the storage directory's own path of the blob: what nginx's alias maps it to.
    assert (tmp_path / "blobs" / location.removeprefix(PREFIX)).read_bytes() == DATA
    # Everything but the body and its length is the direct answer's.
    for name in (*PASSED_ON, "accept-ranges"):
        assert response.headers[name] == direct.headers[name], name
    read = audit_lines(tmp_path)[-1]
    assert (read["action"], read["size"], read["sent_by"]) == ("read", len(DATA), "nginx")


async def test_without_the_proxys_request_header_the_server_sends_the_bytes(
    tmp_path: Path, accel: tuple[httpx.AsyncClient, str]
) -> None:
    http, url = accel
    for headers in ({}, {"X-Sendfile-Type": "X-Sendfile"}):
        response = await http.get(url, headers=headers)
        assert response.content == DATA
        assert "x-accel-redirect" not in response.headers
    assert "sent_by" not in audit_lines(tmp_path)[-1]


async def test_ranges_heads_and_conditional_answers_stay_with_the_server(
    accel: tuple[httpx.AsyncClient, str],
) -> None:
    http, url = accel
    ranged = await http.get(url, headers={**FROM_NGINX, "Range": "bytes=4090-4109"})
    assert (ranged.status_code, ranged.content) == (206, DATA[4090:4110])
    window = await http.get(url, params={"offset": "100", "length": "50"}, headers=FROM_NGINX)
    assert (window.status_code, window.content) == (206, DATA[100:150])
    head = await http.head(url, headers=FROM_NGINX)
    assert head.headers["content-length"] == str(len(DATA))
    unchanged = await http.get(url, headers={**FROM_NGINX, "If-None-Match": head.headers["etag"]})
    assert unchanged.status_code == 304
    for answer in (ranged, window, head, unchanged):
        assert "x-accel-redirect" not in answer.headers
    # A Range the plan ignores (If-Range of another tag) makes a whole 200: nginx may send that one.
    ignored = await http.get(url, headers={**FROM_NGINX, "Range": "bytes=0-9", "If-Range": '"sha256-x"'})
    assert ignored.status_code == 200
    assert "x-accel-redirect" in ignored.headers


async def test_without_the_setting_the_proxys_header_changes_nothing(tmp_path: Path) -> None:
    async for http, url in stored_client(disk_settings(tmp_path)):
        response = await http.get(url, headers=FROM_NGINX)
        assert response.content == DATA
        assert "x-accel-redirect" not in response.headers


async def test_storage_without_files_sends_the_bytes_itself(tmp_path: Path) -> None:
    async for http, url in stored_client(make_settings(tmp_path, accel_redirect=PREFIX)):
        response = await http.get(url, headers=FROM_NGINX)
        assert response.content == DATA
        assert "x-accel-redirect" not in response.headers


async def test_a_blob_file_of_the_wrong_size_is_corruption_not_a_redirect(
    tmp_path: Path, accel: tuple[httpx.AsyncClient, str]
) -> None:
    http, url = accel
    location = (await http.get(url, headers=FROM_NGINX)).headers["x-accel-redirect"]
    path = tmp_path / "blobs" / location.removeprefix(PREFIX)
    path.write_bytes(DATA[:-1])
    response = await http.get(url, headers=FROM_NGINX)
    assert response.status_code == 500
    assert response.json()["code"] == "corruption"
    assert "x-accel-redirect" not in response.headers
    path.unlink()
    assert (await http.get(url, headers=FROM_NGINX)).status_code == 404


@pytest.mark.parametrize("value", ["/", "_blobstore/", "/_blobstore", "/a b/", "/../", "/x/./", "/x\r\n/"])
def test_the_setting_takes_only_a_plain_path_prefix(value: str) -> None:
    with pytest.raises(SettingsError, match="BLOBSTORE_ACCEL_REDIRECT"):
        load_settings(accel_redirect=value)


def test_the_setting_keeps_a_plain_path_prefix() -> None:
    assert load_settings(accel_redirect="/internal/blobs/").accel_redirect == "/internal/blobs/"


def test_the_setting_is_ignored_without_files_and_serve_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def ignored(**values: Any) -> bool:
        return "BLOBSTORE_ACCEL_REDIRECT" in Settings(data_dir=tmp_path, **values).ignored_settings

    assert not ignored(storage_url=(tmp_path / "blobs").as_uri(), accel_redirect=PREFIX)
    assert not ignored(accel_redirect=PREFIX)  # the default storage: file://<data dir>/blobs
    assert ignored(storage_url="memory://", accel_redirect=PREFIX)
    assert ignored(storage_url="s3://b/p", accel_redirect=PREFIX)
    assert not ignored(storage_url="memory://")

    monkeypatch.setenv("BLOBSTORE_ACCEL_REDIRECT", PREFIX)
    monkeypatch.setenv("BLOBSTORE_STORAGE_URL", "memory://")
    # No ASGI server: serve returns once its start-up checks and messages are done.
    monkeypatch.setitem(serve_module._RUNNERS, "uvicorn", lambda settings: None)
    result = CliRunner().invoke(main, ["serve", "--data-dir", str(tmp_path / "d"), "--server", "uvicorn"])
    said = "BLOBSTORE_ACCEL_REDIRECT is ignored: nginx can only send the files of local storage"
    assert said in result.output
    monkeypatch.setenv("BLOBSTORE_STORAGE_URL", (tmp_path / "blobs").as_uri())
    quiet = CliRunner().invoke(main, ["serve", "--data-dir", str(tmp_path / "e"), "--server", "uvicorn"])
    assert "ACCEL_REDIRECT" not in quiet.output

"""One ``blobstore serve`` on local disk behind the shipped ``deploy/nginx-single.conf``, started with
``BLOBSTORE_ACCEL_REDIRECT``: nginx sends whole downloads from the blob file with the server's headers, the
server sends ranges (checked), and nobody reaches the internal location from outside."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.deploy.nginx import PASSED_ON, render_single_site, running
from tests.fixtures.ports import free_port
from tests.fixtures.server import Server, start_server, stop_server
from tests.fixtures.waiting import wait_until

pytestmark = [pytest.mark.e2e]

DEADLINE_SECONDS = 120.0
DATA = os.urandom(3 * 1024 * 1024 + 12345)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    started = start_server(tmp_path, env={"BLOBSTORE_ACCEL_REDIRECT": "/_blobstore/"})
    try:
        yield started
    finally:
        stop_server(started)


@pytest.fixture
def nginx(tmp_path: Path, server: Server) -> Iterator[str]:
    root = tmp_path / "nginx"
    root.mkdir()
    port = free_port()
    site = render_single_site(port, int(server.url.rsplit(":", 1)[1]), server.data_dir / "blobs")
    with running(root, site, port, within=DEADLINE_SECONDS) as url:
        yield url


def access_line(server: Server, request_id: str) -> dict[str, Any]:
    def logged() -> bool:
        return f'"request_id":"{request_id}"' in server.log_text()

    wait_until(logged, within=DEADLINE_SECONDS, what=f"the access line of {request_id}")
    line = next(text for text in server.log_text().splitlines() if f'"request_id":"{request_id}"' in text)
    found: dict[str, Any] = json.loads(line[line.index("{") :])
    return found


def curl(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["curl", "-sS", "--fail", *args], capture_output=True, timeout=120, check=True)


def test_nginx_sends_whole_downloads_with_the_servers_headers_and_the_server_sends_ranges(
    tmp_path: Path, server: Server, nginx: str
) -> None:
    with httpx.Client(timeout=120) as http:
        stored = http.post(f"{nginx}/v1/artifacts", params={"name": "scan.pdf"}, content=DATA)
        assert stored.status_code == 201, stored.text
        url = f"/v1/artifacts/{stored.json()['id']}/content"
        direct = http.get(f"{server.url}{url}")
        assert direct.content == DATA
        assert "x-accel-redirect" not in direct.headers

        # A whole download through nginx (curl): the bytes from the file, the validators from the server.
        body = tmp_path / "got.pdf"
        headers = curl("-D", "-", "-o", str(body), "-H", "X-Request-Id: accel-whole", f"{nginx}{url}").stdout
        assert hashlib.sha256(body.read_bytes()).hexdigest() == stored.json()["sha256"]
        received = dict(
            line.split(": ", 1) for line in headers.decode("latin-1").lower().splitlines()[1:] if ": " in line
        )
        assert received["content-length"] == str(len(DATA))
        for name in PASSED_ON:
            assert received[name] == direct.headers[name].lower(), name
        assert received["x-request-id"] == "accel-whole"
        assert "x-accel-redirect" not in received
        assert access_line(server, "accel-whole")["bytes_out"] == 0

        # A range (and an If-None-Match) through nginx: answered by the server, its bytes checked there.
        ranged = http.get(
            f"{nginx}{url}", headers={"Range": "bytes=1048570-1048599", "X-Request-Id": "accel-range"}
        )
        assert (ranged.status_code, ranged.content) == (206, DATA[1048570:1048600])
        assert access_line(server, "accel-range")["bytes_out"] == 30
        unchanged = http.get(f"{nginx}{url}", headers={"If-None-Match": direct.headers["etag"]})
        assert unchanged.status_code == 304

        # The internal location is not reachable from outside, with or without a real blob's path.
        asked = http.get(f"{server.url}{url}", headers={"X-Sendfile-Type": "X-Accel-Redirect"})
        location = asked.headers["x-accel-redirect"]
        for path in (location, "/_blobstore/", "/_blobstore/blobs/"):
            assert http.get(f"{nginx}{path}").status_code == 404, path

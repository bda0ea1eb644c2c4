"""A real browser on another origin: headless Chromium loads a page from a second local origin that uploads a
file to a real ``blobstore serve`` with Uppy's tus plugin, is interrupted by a page reload, resumes from the
tus fingerprint in localStorage, and reads a range back with ``fetch()``. The server is told to allow the
page's origin (``--cors-origins``) and requires a bearer token, so every cross-origin request is preflighted.

The page is ``js/page.mjs`` bundled by esbuild; ``js/drive.mjs`` drives Chromium with playwright-core and
talks to this test in JSON lines. All packages are pinned in ``js/package.json`` + ``js/package-lock.json``.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import http.server
import json
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fixtures.browser import CHROMIUM, NODE, playwright_ready
from tests.fixtures.commands import run_cli
from tests.fixtures.ports import free_port
from tests.fixtures.server import Server, isolated_env, serving
from tests.fixtures.threaded_http import serving_on_a_thread

JS_DIR = Path(__file__).parent / "js"
KiB = 1024
MiB = 1024 * KiB

FILE_SIZE = 2 * MiB + 123
CHUNK_SIZE = 256 * KiB
PATCHES_BEFORE_RELOAD = 3
DRIVER_DEADLINE_SECONDS = 180.0  # a watchdog against a hung browser, not a measurement


@pytest.fixture(scope="session")
def page_assets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The page's directory: index.html and the esbuild bundle of page.mjs."""
    playwright_ready(JS_DIR)
    root = tmp_path_factory.mktemp("page")
    subprocess.run(
        [
            str(JS_DIR / "node_modules" / ".bin" / "esbuild"),
            str(JS_DIR / "page.mjs"),
            "--bundle",
            "--format=iife",
            "--log-level=warning",
            f"--outfile={root / 'bundle.js'}",
        ],
        check=True,
        capture_output=True,
    )
    shutil.copy(JS_DIR / "index.html", root / "index.html")
    return root


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def page_origin(page_assets: Path, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A static file server on another port of 127.0.0.1: another origin than the blobstore server."""
    site = tmp_path / "site"
    shutil.copytree(page_assets, site)
    handler = functools.partial(QuietHandler, directory=str(site))
    with serving_on_a_thread(handler, free_port()) as origin:
        yield origin, site


def create_token(data_dir: Path) -> str:
    done = run_cli(
        ["token", "create", "--namespace", "web", "--scopes", "read,write", "--json"],
        isolated_env({"BLOBSTORE_DATA_DIR": str(data_dir)}),
    )
    assert done.returncode == 0, done.stderr
    token: str = json.loads(done.stdout)["token"]
    return token


@pytest.fixture
def cors_server(page_origin: tuple[str, Path], tmp_path: Path) -> Iterator[tuple[Server, str]]:
    """``blobstore serve`` (granian, the default) allowing the page's origin, with one token."""
    root = tmp_path / "server"
    root.mkdir()
    token = create_token(root / "data")
    with serving(root, "--cors-origins", page_origin[0]) as running:
        yield running, token


def kill_group(driver: subprocess.Popen[str]) -> None:
    """The driver and the browser it started, if they still run."""
    if driver.poll() is None:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait()


def read_event(driver: subprocess.Popen[str]) -> dict[str, Any]:
    """The driver's next JSON line; its stderr if it ended instead."""
    assert driver.stdout is not None
    assert driver.stderr is not None
    line = driver.stdout.readline()
    if not line:
        driver.wait(30)
        raise AssertionError(f"the browser driver ended early ({driver.returncode}):\n{driver.stderr.read()}")
    event: dict[str, Any] = json.loads(line)
    return event


def test_uppy_on_another_origin_uploads_resumes_after_a_reload_and_reads_a_range(
    page_origin: tuple[str, Path], cors_server: tuple[Server, str]
) -> None:
    origin, site = page_origin
    server, token = cors_server
    data = os.urandom(FILE_SIZE)
    (site / "file.bin").write_bytes(data)
    range_start, range_end = (
        PATCHES_BEFORE_RELOAD * CHUNK_SIZE - 1000,
        PATCHES_BEFORE_RELOAD * CHUNK_SIZE + 999,
    )
    config = {
        "chromium": str(CHROMIUM),
        "pageUrl": f"{origin}/index.html",
        "server": server.url,
        "endpoint": f"{server.url}/tus/",
        "token": token,
        "chunkSize": CHUNK_SIZE,
        "stallAfterPatches": PATCHES_BEFORE_RELOAD,
        "rangeStart": range_start,
        "rangeEnd": range_end,
        "timeoutMs": int(DRIVER_DEADLINE_SECONDS * 1000),
    }
    auth = {"Authorization": f"Bearer {token}"}
    with subprocess.Popen(
        [str(NODE), str(JS_DIR / "drive.mjs"), json.dumps(config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: Chromium goes with it if it must be killed
    ) as driver:
        watchdog = threading.Timer(DRIVER_DEADLINE_SECONDS, kill_group, [driver])
        watchdog.start()
        try:
            assert driver.stdin is not None
            stalled = read_event(driver)
            assert stalled["event"] == "stalled", stalled
            upload_url = stalled["uploadUrl"]
            assert upload_url.startswith(f"{server.url}/tus/u_")  # Location was readable cross-origin
            assert any(
                key.startswith("tus::") for key in stalled["storage"]
            )  # the fingerprint to resume from

            # The server has part of the file, and exactly what the page sent before it was held.
            head = httpx.head(upload_url, headers={"Tus-Resumable": "1.0.0", **auth})
            assert head.status_code == 200
            offset = int(head.headers["upload-offset"])
            assert offset == PATCHES_BEFORE_RELOAD * CHUNK_SIZE
            assert 0 < offset < FILE_SIZE

            driver.stdin.write("reload\n")
            driver.stdin.flush()
            done = read_event(driver)
            assert driver.stderr is not None
            stderr = driver.stderr.read()  # to its end: the driver closes the browser and exits
            assert driver.wait(DRIVER_DEADLINE_SECONDS) == 0, stderr
        finally:
            watchdog.cancel()
            kill_group(driver)
    assert done["event"] == "done", stderr
    assert done["failed"] == [], (done, stderr)

    # The second page resumed the same upload where the server said it stood, without creating another one.
    requests = [entry for entry in done["log"] if entry["kind"] == "request"]
    assert [entry["method"] for entry in requests if entry["method"] == "POST"] == []
    assert requests[0]["method"] == "HEAD"
    assert requests[0]["url"] == upload_url
    first_patch = next(entry for entry in requests if entry["method"] == "PATCH")
    assert int(first_patch["offset"]) == offset

    # The stored artifact is the file, checked on the server.
    artifact_id = done["artifactId"]
    assert artifact_id, done  # Blobstore-Artifact-Id was readable cross-origin
    info = httpx.get(f"{server.url}/v1/artifacts/{artifact_id}", headers=auth)
    assert info.status_code == 200
    assert info.json()["sha256"] == hashlib.sha256(data).hexdigest()
    assert info.json()["size"] == FILE_SIZE
    stored = httpx.get(f"{server.url}/v1/artifacts/{artifact_id}/content", headers=auth, timeout=60)
    assert hashlib.sha256(stored.content).hexdigest() == hashlib.sha256(data).hexdigest()

    # The page's ranged fetch(): 206 with its headers readable, and the right bytes across the reload point.
    ranged = done["range"]
    assert ranged["status"] == 206
    assert ranged["contentRange"] == f"bytes {range_start}-{range_end}/{FILE_SIZE}"
    assert ranged["acceptRanges"] == "bytes"
    assert ranged["etag"]
    assert int(ranged["contentLength"]) == range_end - range_start + 1
    assert base64.b64decode(ranged["body"]) == data[range_start : range_end + 1]

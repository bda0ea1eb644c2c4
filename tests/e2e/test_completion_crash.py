"""A server killed (SIGKILL) while it joins an upload's chunks: after a restart the upload is finished by the
client's next request instead of staying ``completing`` until its lease of a day runs out."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.e2e.completion import (
    ARTIFACT_HEADER,
    TUS,
    begin_chunked,
    download_sha256,
    kill_server,
    sqlite_state,
    tus_create,
    tus_patch,
    wait_for_state,
)
from tests.e2e.files import write_distinct_blocks
from tests.fixtures.server import Server, start_server, stop_server

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SIZE_MIB = 128
"""Big enough that joining the chunks on local disk takes a moment, so the kill lands inside it."""
REQUEST_TIMEOUT = 60.0
"""Well under the two minutes a ``complete`` used to wait for a completion that nobody was running."""
ENV = {"BLOBSTORE_TUS_CHUNK_SIZE": str(8 * 1024 * 1024), "BLOBSTORE_LOG_LEVEL": "warning"}


@pytest.fixture(scope="module")
def big_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    path = tmp_path_factory.mktemp("big") / "big.bin"
    return path, write_distinct_blocks(path, SIZE_MIB)


def _crash_while_completing(
    root: Path, start: Server, upload_id: str, request: Future[httpx.Response]
) -> Server:
    """Kill ``start`` as soon as the upload is ``completing``, then start a new server on the same data."""
    wait_for_state(lambda: sqlite_state(start.data_dir)(upload_id), "completing")
    kill_server(start)
    with contextlib.suppress(httpx.TransportError):  # the connection died with the server, as it should
        request.result(timeout=REQUEST_TIMEOUT)
    assert sqlite_state(start.data_dir)(upload_id) == "completing"
    return start_server(root, env=ENV)


@contextlib.contextmanager
def chunked_completion_killed_midway(root: Path, path: Path, sha256: str) -> Iterator[tuple[Server, str]]:
    """A chunked upload of ``path`` whose completion was killed midway: the restarted server, the upload."""
    server = start_server(root, env=ENV)
    restarted: Server | None = None
    try:
        upload_id = begin_chunked(server.url, path, sha256)
        # The process that accepted the chunks joined them while they arrived (in its memory: join_ahead), so
        # its completion could have nothing left to hash and end before it is seen. A new process completes
        # from the first byte, which takes a moment for 128 MiB: the kill lands inside it.
        stop_server(server)
        server = start_server(root, env=ENV)
        with ThreadPoolExecutor(max_workers=1) as pool:
            pending = pool.submit(
                httpx.post, f"{server.url}/v1/uploads/{upload_id}/complete", json={}, timeout=REQUEST_TIMEOUT
            )
            restarted = _crash_while_completing(root, server, upload_id, pending)
        yield restarted, upload_id
    finally:
        stop_server(server)
        if restarted is not None:
            stop_server(restarted)


@pytest.mark.parametrize("first", ["complete", "status"])
def test_a_completion_killed_midway_is_finished_after_a_restart(
    tmp_path: Path, big_file: tuple[Path, str], first: str
) -> None:
    path, sha256 = big_file
    with chunked_completion_killed_midway(tmp_path, path, sha256) as (restarted, upload_id):
        if first == "status":
            # The abandoned completion is given back: open, every chunk there, so the client may complete,
            # resend chunks or abort.
            status = httpx.get(f"{restarted.url}/v1/uploads/{upload_id}", timeout=REQUEST_TIMEOUT)
            assert status.status_code == 200, status.text
            assert (status.json()["state"], status.json()["missing"]) == ("open", [])
        done = httpx.post(
            f"{restarted.url}/v1/uploads/{upload_id}/complete", json={}, timeout=REQUEST_TIMEOUT
        )
        assert done.status_code == 201, done.text
        artifact = done.json()
        assert artifact["size"] == SIZE_MIB * 1024 * 1024
        assert download_sha256(restarted.url, artifact["id"]) == sha256
        status = httpx.get(f"{restarted.url}/v1/uploads/{upload_id}", timeout=REQUEST_TIMEOUT).json()
        assert (status["state"], status["artifact_id"]) == ("completed", artifact["id"])


def test_after_a_killed_completion_the_client_can_resend_chunks_and_abort(
    tmp_path: Path, big_file: tuple[Path, str]
) -> None:
    """After the restart, the recovered upload is an ordinary open one: chunks can be resent, and it can be
    aborted."""
    path, sha256 = big_file
    with chunked_completion_killed_midway(tmp_path, path, sha256) as (restarted, upload_id):
        with path.open("rb") as handle:
            first_chunk = handle.read(8 * 1024 * 1024)
        resent = httpx.put(
            f"{restarted.url}/v1/uploads/{upload_id}/chunks/0", content=first_chunk, timeout=REQUEST_TIMEOUT
        )
        assert resent.status_code == 200, resent.text
        aborted = httpx.delete(f"{restarted.url}/v1/uploads/{upload_id}", timeout=REQUEST_TIMEOUT)
        assert aborted.status_code == 204, aborted.text
        assert sqlite_state(restarted.data_dir)(upload_id) == "aborted"


@pytest.mark.parametrize("resume", ["HEAD", "PATCH"])
def test_a_tus_completion_killed_midway_is_finished_by_the_resuming_request(
    tmp_path: Path, big_file: tuple[Path, str], resume: str
) -> None:
    path, sha256 = big_file
    size = path.stat().st_size
    server = start_server(tmp_path, env=ENV)
    restarted: Server | None = None
    try:
        upload_id = tus_create(server.url, size)
        with ThreadPoolExecutor(max_workers=1) as pool:
            # One PATCH with every byte: the server completes the upload before it answers.
            pending = pool.submit(tus_patch, server.url, upload_id, path, 0, size, timeout=REQUEST_TIMEOUT)
            restarted = _crash_while_completing(tmp_path, server, upload_id, pending)

        url = f"{restarted.url}/tus/{upload_id}"
        if resume == "HEAD":
            answer = httpx.head(url, headers=TUS, timeout=REQUEST_TIMEOUT)
            assert answer.status_code == 200, answer.headers
        else:
            answer = tus_patch(restarted.url, upload_id, path, size, 0, timeout=REQUEST_TIMEOUT)
            assert answer.status_code == 204, answer.text
        assert answer.headers["Upload-Offset"] == str(size)
        artifact_id = answer.headers[ARTIFACT_HEADER]
        assert download_sha256(restarted.url, artifact_id) == sha256
    finally:
        stop_server(server)
        if restarted is not None:
            stop_server(restarted)

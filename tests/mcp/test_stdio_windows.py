"""Windows over ``blobstore mcp`` on stdio, where each blob is written into its line as it is.

Through the official SDK client, with more windows in flight than the writer remembers blobs, and through a
raw client that sends many requests at once and reads nothing for a while (the pipe fills, long and short
answers queue): every answer is one whole JSON line with the bytes, type and digests docs/mcp.md gives.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import time
from typing import Any

import anyio
import pytest
from mcp.types import BlobResourceContents

from mcp_resources.results.wire_blobs import MAX_REMEMBERED
from mcp_resources.uris import WINDOW_META_KEY, window_uri
from tests.fixtures.mcp_wire import initialize_request
from tests.fixtures.server import BLOBSTORE, isolated_env
from tests.mcp.conftest import NAMESPACE, Dataset, connect

pytestmark = pytest.mark.e2e

MiB = 1024 * 1024


def expected_window(dataset: Dataset, offset: int, length: int) -> bytes:
    return dataset.big_bytes[offset : min(offset + min(length, MiB), dataset.big.size)]


def check_window(dataset: Dataset, uri: str, offset: int, length: int, contents: dict[str, Any]) -> None:
    data = base64.b64decode(contents["blob"], validate=True)
    assert data == expected_window(dataset, offset, length)
    assert contents["uri"] == uri
    assert contents["mimeType"] == "application/octet-stream"
    meta = contents["_meta"][WINDOW_META_KEY]
    end = offset + len(data)
    assert meta == {
        "offset": offset,
        "length": len(data),
        "size": dataset.big.size,
        "eof": end == dataset.big.size,
        "sha256": dataset.big.sha256,
        "windowSha256": hashlib.sha256(data).hexdigest(),
        "next": None if end == dataset.big.size else window_uri(dataset.big.id, end, min(length, MiB)),
    }


async def test_concurrent_windows_through_the_sdk_client_carry_their_bytes_type_and_digests(
    dataset: Dataset, request: pytest.FixtureRequest
) -> None:
    size = dataset.big.size
    cases = [(i * 1_000_003 % (size - MiB), MiB - i * 4099) for i in range(2 * MAX_REMEMBERED + 2)]
    cases += [(size - 300_001, 300_001), (size - 70_000, MiB)]
    found: dict[str, dict[str, Any]] = {}
    async with connect("stdio", dataset, request) as client:

        async def read(uri: str) -> None:
            result = await client.read_resource(uri, cache_mode="bypass")
            (contents,) = result.contents
            assert isinstance(contents, BlobResourceContents)
            found[uri] = contents.model_dump(by_alias=True, mode="json", exclude_none=True)

        async with anyio.create_task_group() as tg:
            for offset, length in cases:
                tg.start_soon(read, window_uri(dataset.big.id, offset, length))
    for offset, length in cases:
        uri = window_uri(dataset.big.id, offset, length)
        check_window(dataset, uri, offset, length, found[uri])


def test_answers_stay_whole_lines_when_the_host_reads_late(dataset: Dataset) -> None:
    """Long answers go straight to the pipe or through a worker thread, short ones through the event loop:
    with the pipe full and many answers waiting, each still goes out whole and alone on its line."""
    argv = [BLOBSTORE, "mcp", "--data-dir", str(dataset.settings.data_dir), "--namespace", NAMESPACE]
    process = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=isolated_env(),
    )
    assert process.stdin is not None
    assert process.stdout is not None
    messages: list[dict[str, Any]] = [
        initialize_request("late", request_id=0),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    windows: dict[int, tuple[str, int, int]] = {}
    for n in range(1, 25):
        if n % 3 == 0:
            messages.append({"jsonrpc": "2.0", "id": n, "method": "ping"})
            continue
        offset, length = n * 611_953, MiB if n % 2 else 200_000 + n
        uri = window_uri(dataset.big.id, offset, length)
        windows[n] = (uri, offset, length)
        messages.append({"jsonrpc": "2.0", "id": n, "method": "resources/read", "params": {"uri": uri}})
    try:
        process.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
        process.stdin.flush()
        time.sleep(1.0)  # read nothing yet: the pipe fills and the rest of the answers wait
        # Then read slowly, so the pipe is often full when an answer is written.
        answers: dict[int, dict[str, Any]] = {}
        pending = b""
        while len(answers) < 25:
            chunk = os.read(process.stdout.fileno(), 16384)
            assert chunk, "the server closed its stdout"
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                answer = json.loads(line)
                answers[answer["id"]] = answer
            time.sleep(0.001)
        assert pending == b""
    finally:
        process.stdin.close()
        process.wait(timeout=30)
        process.stdout.close()
    assert "serverInfo" in answers[0]["result"]
    for n in range(1, 25):
        if n in windows:
            uri, offset, length = windows[n]
            (contents,) = answers[n]["result"]["contents"]
            check_window(dataset, uri, offset, length, contents)
        else:
            assert answers[n]["result"] == {}


def _minor_faults(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[7])


def test_windows_reuse_the_servers_memory_rather_than_fault_in_fresh_pages(dataset: Dataset) -> None:
    """A 1 MiB window makes about 4 MiB of short-lived buffers; with the allocator's defaults each window took
    fresh pages for them (about 1,000 page faults per window), now the next window reuses them."""
    argv = [BLOBSTORE, "mcp", "--data-dir", str(dataset.settings.data_dir), "--namespace", NAMESPACE]
    process = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=isolated_env()
    )
    assert process.stdin is not None
    assert process.stdout is not None
    stdin, stdout = process.stdin, process.stdout

    def call(n: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        message = {"jsonrpc": "2.0", "id": n, "method": method, "params": params}
        stdin.write(json.dumps(message).encode() + b"\n")
        stdin.flush()
        answer: dict[str, Any] = json.loads(stdout.readline())
        assert answer["id"] == n
        return answer

    def read_windows(first: int, count: int) -> None:
        for n in range(first, first + count):
            offset = n * 524_309 % (dataset.big.size - MiB)  # unaligned: two blocks read and checked
            uri = window_uri(dataset.big.id, offset, MiB)
            (contents,) = call(n, "resources/read", {"uri": uri})["result"]["contents"]
            check_window(dataset, uri, offset, MiB, contents)

    try:
        call(0, "initialize", initialize_request("t")["params"])
        stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        read_windows(1, 5)
        before = _minor_faults(process.pid)
        read_windows(6, 20)
        per_window = (_minor_faults(process.pid) - before) / 20
    finally:
        stdin.close()
        process.wait(timeout=30)
        stdout.close()
    assert per_window < 100

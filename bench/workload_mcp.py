"""The MCP workload of the suite (``mcp``): 4 KiB reads over ``blobstore mcp`` stdio next to
server-filesystem, 1 MiB windows next to HTTP ranges of the same windows and next to a bare stdio server, and
the minimal client's own decoding of a window."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from pathlib import Path

import httpx
from clients import KiB, MiB
from harness import BENCH_DIR, PEER_DIR, Row, Targets, find_binary, peak_rss_mib, rotations
from mcp_client import RawStdioClient

from mcp_resources.uris import window_uri


def synchronous(reader: Callable[[], Awaitable[bytes] | bytes]) -> Callable[[], bytes]:
    """The raw stdio client's readers answer in the calling thread: what they return is the bytes."""

    def read() -> bytes:
        data = reader()
        if not isinstance(data, bytes):
            raise TypeError("a raw stdio reader returned an awaitable")
        return data

    return read


def bench_mcp(t: Targets, runs: int, ops: int, windows: int, work: Path) -> tuple[list[Row], float]:
    """4 KiB read latency next to server-filesystem, and 1 MiB windows next to HTTP ranges of the same."""
    small = os.urandom(4 * KiB)
    files = work / "files"
    files.mkdir()
    (files / "small.bin").write_bytes(small)
    created = httpx.post(f"{t.ours.base}/v1/artifacts?name=small.bin", content=small).json()
    ours_argv = [str(Path(sys.executable).with_name("blobstore")), "mcp", "--data-dir", str(t.ours.data_dir)]
    latency = Row(
        "4 KiB MCP read (stdio, minimal client), median", "ms", higher_is_better=False, goal="≤ 1.0"
    )
    window_row = Row("1 MiB MCP windows (stdio) vs HTTP ranges of the same windows", "MiB/s", goal="≥ 0.5")
    window_row.peer_name = "ours over HTTP"
    rng = random.Random(1)
    offsets = [rng.randrange(0, max(1, t.payload.size - MiB)) for _ in range(windows)]
    expected = {offset: hashlib.sha256(t.payload.slice(offset, MiB)).hexdigest() for offset in offsets}
    with ExitStack() as stack:
        ours = RawStdioClient(ours_argv)
        stack.callback(ours.close)
        readers: dict[str, Callable[[], bytes]] = {
            "ours": synchronous(ours.window_reader(f"blobstore://artifacts/{created['id']}", False))
        }
        peer_ok = PEER_DIR.joinpath("dist", "index.js").exists() and find_binary("node") is not None
        if peer_ok:
            peer = RawStdioClient([str(find_binary("node")), str(PEER_DIR / "dist" / "index.js"), str(files)])
            stack.callback(peer.close)
            readers["peer"] = synchronous(peer.media_reader(files / "small.bin"))
            latency.peer_name = "server-filesystem"
        else:
            latency.note = f"server-filesystem missing: run `npm ci --prefix {BENCH_DIR}`"
        samples = {"ours": latency.ours, "peer": latency.peer}
        for run, name in rotations(list(readers), runs + 1):
            seconds = []
            for _ in range(ops):
                started = time.perf_counter()
                data = readers[name]()
                seconds.append(time.perf_counter() - started)
                if data != small:
                    raise SystemExit(f"{name}: 4 KiB read returned other bytes")
            if run:
                samples[name].append(statistics.median(seconds) * 1000)

        http = stack.enter_context(httpx.Client(timeout=60))
        window_readers: dict[str, Callable[[int], bytes]] = {
            "mcp": lambda offset: synchronous(
                ours.window_reader(window_uri(t.artifact_id, offset, MiB), False)
            )(),
            "http": lambda offset: (
                http.get(t.content_url, headers={"range": f"bytes={offset}-{offset + MiB - 1}"}).content
            ),
        }
        # The least stdio server, in the same rotation: one prepared window's line written per request.
        bare = RawStdioClient([sys.executable, str(BENCH_DIR / "bare_mcp.py")])
        stack.callback(bare.close)
        window_readers["bare"] = lambda offset: synchronous(bare.window_reader("bare://window", False))()
        bare_row = Row(
            "ceiling: 1 MiB windows from a bare stdio server (one prepared answer), the same client",
            "MiB/s",
            peer_name="ours over HTTP",
            peer=window_row.peer,
            goal="bounds the windows row (≥ 0.5)",
        )
        window_samples = {"mcp": window_row.ours, "http": window_row.peer, "bare": bare_row.ours}
        for _, name in rotations(list(window_readers), runs):
            started = time.perf_counter()
            got = [window_readers[name](offset) for offset in offsets]
            window_samples[name].append(len(offsets) / (time.perf_counter() - started))
            for offset, data in zip(offsets, got, strict=True):
                if name == "bare":
                    if len(data) != MiB:
                        raise SystemExit("bare stdio server: a window of another length")
                elif hashlib.sha256(data).hexdigest() != expected[offset]:
                    raise SystemExit(f"{name}: window at {offset} returned other bytes")
        mcp_peak = peak_rss_mib(ours.process.pid)
    # The client reads one window after the other: its own decoding alone bounds the windows row.
    decoding = Row(
        "ceiling: the minimal MCP client's own decoding of 1 MiB windows (json.loads, base64)",
        "MiB/s",
        [window_decoding(max(windows, 8)) for _ in range(runs)],
        "ours over HTTP",
        window_row.peer,
        goal="bounds the windows row (≥ 0.5)",
    )
    bare_row.note = (
        f"ours is {statistics.median(window_row.ours) / statistics.median(bare_row.ours):.2f} of it"
    )
    return [latency, window_row, decoding, bare_row], mcp_peak


def window_decoding(rounds: int) -> float:
    """MiB/s of the minimal client's own work on 1 MiB windows: ``json.loads`` of the answer's line and the
    standard library's base64 decoding of its blob, as ``RawStdioClient.window_reader`` does per window."""
    blob = base64.b64encode(os.urandom(MiB)).decode()
    contents = [{"uri": "blobstore://artifacts/a", "mimeType": "application/octet-stream", "blob": blob}]
    result = {"contents": contents}
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "result": result}).encode()
    started = time.perf_counter()
    for _ in range(rounds):
        message = json.loads(line)
        if len(base64.b64decode(message["result"]["contents"][0]["blob"])) != MiB:
            raise SystemExit("window decoding: wrong length")
    return rounds / (time.perf_counter() - started)

"""The MCP clients of the benchmarks: a minimal JSON-RPC stdio client (``mcp_read.py``, the suite's ``mcp``
and ``list`` workloads, ``mcp_small_cpu.py``) and readers over the official SDK's ``mcp.Client``."""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.types import BlobResourceContents, EmbeddedResource

from mcp_resources.uris import WINDOW_META_KEY

LEGACY_VERSION = "2025-11-25"

Reader = Callable[[], "Awaitable[bytes] | bytes"]


class RawStdioClient:
    """A minimal JSON-RPC client over a server's stdin/stdout, on the handshake era (2025-11-25).

    It reads each line in linear time and parses it with ``json.loads`` only, so the servers' own cost shows
    without the SDK client's per-message work (pydantic validation, re-joining a long line chunk by chunk).
    """

    def __init__(self, argv: list[str]) -> None:
        self.process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        self.last_id = 0
        self.request(
            "initialize",
            {
                "protocolVersion": LEGACY_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "mcp-read-bench", "version": "1"},
            },
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdout is not None
        self.last_id += 1
        self.send({"jsonrpc": "2.0", "id": self.last_id, "method": method, "params": params})
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError(f"{method}: the server closed its stdout")
            message = json.loads(line)
            if message.get("id") != self.last_id:
                continue  # a notification
            if "error" in message:
                raise RuntimeError(f"{method}: {message['error'].get('message')}")
            result: dict[str, Any] = message["result"]
            return result

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def window_reader(self, uri: str, follow: bool) -> Reader:
        def read() -> bytes:
            pieces: list[bytes] = []
            next_uri: str | None = uri
            while next_uri is not None:
                contents = self.request("resources/read", {"uri": next_uri})["contents"][0]
                pieces.append(base64.b64decode(contents["blob"]))
                next_uri = contents["_meta"][WINDOW_META_KEY]["next"] if follow else None
            return b"".join(pieces)

        return read

    def media_reader(self, path: Path) -> Reader:
        def read() -> bytes:
            result = self.request("tools/call", {"name": "read_media_file", "arguments": {"path": str(path)}})
            if result.get("isError"):
                raise RuntimeError("read_media_file failed")
            return base64.b64decode(result["content"][0]["resource"]["blob"])

        return read


def sdk_window_reader(client: Client, uri: str, *, follow: bool) -> Reader:
    async def read() -> bytes:
        pieces: list[bytes] = []
        next_uri: str | None = uri
        while next_uri is not None:
            result = await client.read_resource(next_uri)
            contents = result.contents[0]
            if not isinstance(contents, BlobResourceContents):
                raise TypeError(f"expected a blob, got {type(contents).__name__}")
            pieces.append(base64.b64decode(contents.blob))
            next_uri = (contents.meta or {})[WINDOW_META_KEY]["next"] if follow else None
        return b"".join(pieces)

    return read


def sdk_media_reader(client: Client, path: Path) -> Reader:
    async def read() -> bytes:
        result = await client.call_tool("read_media_file", {"path": str(path)})
        if result.is_error:
            raise RuntimeError(f"read_media_file failed: {result.content[0]}")
        block = result.content[0]
        if not isinstance(block, EmbeddedResource) or not isinstance(block.resource, BlobResourceContents):
            raise TypeError(f"expected an embedded blob, got {type(block).__name__}")
        return base64.b64decode(block.resource.blob)

    return read

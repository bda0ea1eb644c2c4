"""A streamable-HTTP upstream for the proxy: every message is a POST, answered as JSON or an SSE stream.

The session id is kept; a 2026-07-28 request gets its ``MCP-Protocol-Version``, ``Mcp-Method`` and
``Mcp-Name`` headers. The standalone GET stream is not opened.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any, Final

import httpx
from mcp.shared.inbound import (
    MCP_METHOD_HEADER,
    MCP_NAME_HEADER,
    MCP_PROTOCOL_VERSION_HEADER,
    NAME_BEARING_METHODS,
    encode_header_value,
)
from mcp.types import PROTOCOL_VERSION_META_KEY

from mcp_resources.proxy.message_reader import Whole

logger = logging.getLogger("mcp_resources.proxy")

MCP_SESSION_ID: Final = "mcp-session-id"


class HttpUpstream:
    """A streamable-HTTP upstream: every message is a POST; answers come back as JSON or an SSE stream."""

    def __init__(self, url: str, headers: Mapping[str, str] | None = None, *, timeout: float = 300.0) -> None:
        self.url = url
        self.description = httpx.URL(url).host or url
        self._headers = dict(headers or {})
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(timeout, connect=30.0))
        self._inbox: asyncio.Queue[Whole | None] = asyncio.Queue()
        self._session_id: str | None = None
        self._version: str | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        self._failed = False

    async def start(self) -> None:
        return None

    async def receive(self) -> Whole | None:
        return await self._inbox.get()

    async def send_parts(self, parts: AsyncIterator[bytes]) -> None:
        await self.send(b"".join([part async for part in parts]))

    def _headers_for(self, message: Mapping[str, Any]) -> dict[str, str]:
        headers = {
            **self._headers,
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
        }
        if self._session_id:
            headers[MCP_SESSION_ID] = self._session_id
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        version = meta.get(PROTOCOL_VERSION_META_KEY) if isinstance(meta, dict) else None
        if isinstance(version, str):
            method = str(message.get("method"))
            headers[MCP_PROTOCOL_VERSION_HEADER] = version
            headers[MCP_METHOD_HEADER] = method
            name_key = NAME_BEARING_METHODS.get(method)
            name = params.get(name_key) if name_key is not None and isinstance(params, dict) else None
            if isinstance(name, str):
                headers[MCP_NAME_HEADER] = encode_header_value(name)
        elif self._version:
            headers[MCP_PROTOCOL_VERSION_HEADER] = self._version
        return headers

    async def send(self, message: bytes) -> None:
        if self._closed:
            raise ConnectionResetError("upstream is closed")
        parsed = json.loads(message)
        task = asyncio.create_task(self._post(message, parsed))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _post(self, body: bytes, message: Mapping[str, Any]) -> None:
        try:
            async with self._client.stream(
                "POST", self.url, content=body, headers=self._headers_for(message)
            ) as response:
                if response.headers.get(MCP_SESSION_ID):
                    self._session_id = response.headers[MCP_SESSION_ID]
                if response.status_code == 202:
                    return
                if response.status_code >= 400:
                    await self._http_error(response, message)
                    return
                kind = response.headers.get("content-type", "").split(";")[0].strip()
                if kind == "text/event-stream":
                    await self._read_sse(response)
                else:
                    answer = (await response.aread()).strip()
                    if answer:
                        self._learn_version(answer)
                        await self._inbox.put(Whole(answer))
        except httpx.HTTPError as exc:
            logger.error("upstream %s: HTTP request failed: %s", self.description, type(exc).__name__)
            await self._fail()

    async def _http_error(self, response: httpx.Response, message: Mapping[str, Any]) -> None:
        body = (await response.aread()).strip()
        if "id" in message and "method" in message:
            try:
                parsed = json.loads(body)
                if isinstance(parsed, dict) and "error" in parsed and "id" in parsed:
                    await self._inbox.put(Whole(body))
                    return
            except ValueError:
                pass
            error = {
                "jsonrpc": "2.0",
                "id": message["id"],
                "error": {"code": -32603, "message": f"upstream answered HTTP {response.status_code}"},
            }
            await self._inbox.put(Whole(json.dumps(error).encode()))
        if response.status_code == 404 and self._session_id is not None:
            logger.error("upstream %s: session ended (HTTP 404)", self.description)
            await self._fail()

    def _learn_version(self, answer: bytes) -> None:
        if self._version is not None or b'"protocolVersion"' not in answer:
            return
        with contextlib.suppress(ValueError, AttributeError):
            result = json.loads(answer).get("result") or {}
            version = result.get("protocolVersion")
            if isinstance(version, str):
                self._version = version

    async def _read_sse(self, response: httpx.Response) -> None:
        data: list[str] = []
        async for line in response.aiter_lines():
            if line == "":
                if data:
                    payload = "\n".join(data).strip().encode()
                    data = []
                    if payload:
                        self._learn_version(payload)
                        await self._inbox.put(Whole(payload))
                continue
            if line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
        if data:
            await self._inbox.put(Whole("\n".join(data).strip().encode()))

    async def _fail(self) -> None:
        if not self._failed:
            self._failed = True
            await self._inbox.put(None)

    async def close(self) -> None:
        self._closed = True
        for task in list(self._tasks):
            task.cancel()
        if self._session_id is not None:
            with contextlib.suppress(httpx.HTTPError):
                await self._client.delete(
                    self.url, headers={**self._headers, MCP_SESSION_ID: self._session_id}
                )
        await self._client.aclose()
        await self._fail()

    def exit_status(self) -> int | None:
        return None

    async def finished(self) -> None:
        return None

"""A streamable-HTTP upstream for the proxy: every message is a POST, answered as JSON or an SSE stream.

Answers are read as a stdio upstream's lines are (:class:`~mcp_resources.proxy.message_reader.MessageReader`
over the body made into lines by :mod:`~mcp_resources.proxy.sse_lines`): a large result streams into the
store as it arrives, and a large request goes out as a chunked body from where it is held. The session id is
kept; a 2026-07-28 request gets its ``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name`` headers. Once
a session is initialized, the standalone GET stream is opened for what the server sends outside a request
(notifications, its own requests), and opened again when the server ends it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
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

from mcp_resources.proxy.mailbox import Mailbox
from mcp_resources.proxy.message_reader import ByteSource, Incoming, MessageReader, Refused, Streamed, Whole
from mcp_resources.proxy.sse_lines import JsonLines, SseLines

logger = logging.getLogger("mcp_resources.proxy")

MCP_SESSION_ID: Final = "mcp-session-id"
ERROR_BODY_MAX: Final = 64 * 1024
"""Of an HTTP error's body, what is read for a JSON-RPC error in it; the rest is not."""
RESUME_ATTEMPTS: Final = 2
"""Failed reconnections in a row after which an answer stream is given up (as the SDK's client does)."""
RESUME_DELAY_DEFAULT: Final = 1.0
"""Seconds before a reconnection when the stream named no ``retry``."""
NOT_ANSWERED: Final = "the upstream ended the answer stream of this request without answering it"
LISTEN_RETRY_MAX: Final = 30.0
"""Seconds between attempts to reopen the GET stream, at most (doubling from one)."""
WAITING_MESSAGES: Final = 16
"""Messages read ahead of the relay, across all open answers."""


class AnswerBytes:
    """An HTTP answer's body as lines, read as a pipe is (:class:`ByteSource`). A body the connection cut
    ends without its last line end, so the message it was in is reported cut off."""

    def __init__(self, chunks: AsyncIterator[bytes], lines: SseLines | JsonLines, who: str) -> None:
        self._chunks = chunks
        self._lines = lines
        self._who = who
        self._pending = b""
        self._done = False
        self.broken = False
        """The connection failed before the body ended."""

    async def read(self, n: int = -1, /) -> bytes:
        while not self._pending and not self._done:
            try:
                chunk = await anext(self._chunks)
            except StopAsyncIteration:
                self._done = True
                self._pending = self._lines.end()
            except httpx.HTTPError as exc:
                logger.error("upstream %s: an answer was cut off: %s", self._who, type(exc).__name__)
                self._done = True
                self.broken = True
            else:
                self._pending = self._lines.feed(chunk)
        if 0 <= n < len(self._pending):
            out, self._pending = self._pending[:n], self._pending[n:]
            return out
        out, self._pending = self._pending, b""
        return out


async def _sent_when_done(parts: AsyncIterator[bytes], sent: asyncio.Event) -> AsyncIterator[bytes]:
    try:
        async for part in parts:
            yield part
    finally:
        sent.set()


def _answers(lines: SseLines | JsonLines, message: Mapping[str, Any]) -> bool:
    """Whether the body is the one answer to ``message``, a request."""
    return isinstance(lines, JsonLines) and "id" in message and "method" in message


def _as_answer(item: Incoming, ident: Any) -> Incoming:
    """``item``, the body of the answer to request ``ident``, refused under that id if it is not JSON."""
    if isinstance(item, Refused) and item.ident is None:
        return dataclasses.replace(item, ident=ident)
    if isinstance(item, Whole):
        try:
            json.loads(item.raw)
        except ValueError as exc:
            return Refused("invalid_json", f"the upstream sent invalid JSON: {exc}", len(item.raw), ident)
    return item


def _resumable(lines: SseLines | JsonLines, answered: Callable[[], bool]) -> bool:
    return (
        isinstance(lines, SseLines)
        and lines.last_event_id is not None
        and lines.at_boundary
        and not answered()
    )


def _is_answer(item: Incoming, request: Any) -> bool:
    """Whether ``item`` is the response to the request of id ``request``."""
    if isinstance(item, Refused):
        return item.method is None and item.ident == request
    if isinstance(item, Streamed):
        message = item.message
    elif b'"result"' in item.raw or b'"error"' in item.raw:
        try:
            message = json.loads(item.raw)
        except ValueError:
            return False
    else:
        return False
    return isinstance(message, dict) and "method" not in message and message.get("id") == request


class HttpUpstream:
    """A streamable-HTTP upstream: every message is a POST; answers come back as JSON or an SSE stream."""

    def __init__(
        self,
        url: str,
        headers: Mapping[str, str] | None = None,
        *,
        reading: Callable[[ByteSource], MessageReader],
        timeout: float = 300.0,
    ) -> None:
        self.url = url
        self.description = httpx.URL(url).host or url
        self._headers = dict(headers or {})
        self._reading = reading
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(timeout, connect=30.0))
        self._inbox = Mailbox(WAITING_MESSAGES)
        self._session_id: str | None = None
        self._version: str | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._listening = False
        self._cancelled: set[str] = set()
        """Requests the host cancelled (their ids as JSON)."""
        self._closed = False

    async def start(self) -> None:
        return None

    async def receive(self) -> Incoming | None:
        return await self._inbox.get()

    async def send(self, message: bytes) -> None:
        parsed = json.loads(message)
        if isinstance(parsed, dict) and parsed.get("method") == "notifications/cancelled":
            params = parsed.get("params")
            if isinstance(params, dict):
                # Its stream may now end unanswered: that is the cancellation, not a failure to report.
                self._cancelled.add(json.dumps(params.get("requestId")))
        await self._post(message, parsed)

    async def send_parts(self, parts: AsyncIterator[bytes], message: Mapping[str, Any]) -> None:
        """POST ``parts`` as a chunked body; return once it is sent (its parts may be held in files the
        caller frees then). The answer is read in the background, as every answer is."""
        sent = asyncio.Event()
        await self._post(_sent_when_done(parts, sent), message, sent)

    async def _post(
        self,
        body: bytes | AsyncIterator[bytes],
        message: Mapping[str, Any],
        sent: asyncio.Event | None = None,
    ) -> None:
        if self._closed:
            raise ConnectionResetError("upstream is closed")
        task = asyncio.create_task(self._exchange(body, message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if sent is not None:
            waiting = asyncio.create_task(sent.wait())
            try:
                await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiting.cancel()

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

    async def _exchange(self, body: bytes | AsyncIterator[bytes], message: Mapping[str, Any]) -> None:
        try:
            async with self._client.stream(
                "POST", self.url, content=body, headers=self._headers_for(message)
            ) as response:
                if response.headers.get(MCP_SESSION_ID):
                    self._session_id = response.headers[MCP_SESSION_ID]
                if response.status_code < 300 and message.get("method") == "notifications/initialized":
                    self._listen()
                if response.status_code == 202:
                    return
                if response.status_code >= 400:
                    await self._http_error(response, message)
                    return
                kind = response.headers.get("content-type", "").split(";")[0].strip()
                await self._read_answer(
                    response, SseLines() if kind == "text/event-stream" else JsonLines(), message
                )
        except httpx.HTTPError as exc:
            logger.error("upstream %s: HTTP request failed: %s", self.description, type(exc).__name__)
            await self._fail()

    def _listen(self) -> None:
        """Open the GET stream of the session (once): "The client MAY issue an HTTP GET to the MCP endpoint.
        This can be used to open an SSE stream, allowing the server to communicate to the client, without
        the client first sending data via HTTP POST." """
        if self._listening or self._session_id is None or self._closed:
            return
        self._listening = True
        task = asyncio.create_task(self._listen_loop())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _listen_loop(self) -> None:
        delay = 1.0
        last_event: str | None = None
        while not self._closed and self._session_id is not None:
            headers = {**self._headers, "accept": "text/event-stream", MCP_SESSION_ID: self._session_id}
            if self._version:
                headers[MCP_PROTOCOL_VERSION_HEADER] = self._version
            if last_event is not None:
                # What the server sent while the stream was closed, if it keeps it.
                headers["last-event-id"] = last_event
            try:
                # No read timeout: the stream is quiet until the server has something to say.
                timeout = httpx.Timeout(None, connect=30.0)
                async with self._client.stream("GET", self.url, headers=headers, timeout=timeout) as response:
                    kind = response.headers.get("content-type", "").split(";")[0].strip()
                    if response.status_code >= 300 or kind != "text/event-stream":
                        if last_event is not None:
                            last_event = None  # a server that cannot replay may still listen
                            continue
                        # "The server MUST either return Content-Type: text/event-stream in response to
                        # this HTTP GET, or else return HTTP 405 Method Not Allowed".
                        logger.info(
                            "upstream %s: no GET stream (HTTP %d)", self.description, response.status_code
                        )
                        return
                    delay = 1.0
                    lines = SseLines()
                    try:
                        await self._read_answer(response, lines, {}, fatal=False)
                    finally:
                        last_event = lines.last_event_id or last_event
            except httpx.HTTPError as exc:
                logger.warning("upstream %s: the GET stream failed: %s", self.description, type(exc).__name__)
            await asyncio.sleep(delay)
            delay = min(delay * 2, LISTEN_RETRY_MAX)

    async def _read_answer(
        self,
        response: httpx.Response,
        lines: SseLines | JsonLines,
        message: Mapping[str, Any],
        *,
        fatal: bool = True,
    ) -> None:
        """Pass the messages of ``response`` on; when its connection breaks, end the upstream if ``fatal``.

        The answer to a request that the stream ends without is resumed with ``Last-Event-ID`` where the
        server allows it (:meth:`_resumed`), else the request gets an error: as the SDK's client, the proxy
        leaves no call waiting on a stream that is over."""
        request = message.get("id") if "method" in message else None
        answered = request is None
        chunks = self._resumed(response, lines, lambda: answered)
        source = AnswerBytes(chunks, lines, self.description)
        reader = self._reading(source)
        try:
            while (item := await reader.next()) is not None:
                if _answers(lines, message):
                    # A JSON body is the answer to the request it came for, even when it cannot be read.
                    item = _as_answer(item, message["id"])
                    answered = True
                elif not answered and _is_answer(item, request):
                    answered = True
                if isinstance(item, Whole):
                    self._learn_version(item.raw)
                await self._inbox.put(item)
        finally:
            await chunks.aclose()
        if source.broken and fatal:
            await self._fail()
            return
        if not answered and json.dumps(request) not in self._cancelled:
            error = {"jsonrpc": "2.0", "id": request, "error": {"code": -32603, "message": NOT_ANSWERED}}
            await self._inbox.put(Whole(json.dumps(error).encode()))
        self._cancelled.discard(json.dumps(request))

    async def _resumed(
        self, response: httpx.Response, lines: SseLines | JsonLines, answered: Callable[[], bool]
    ) -> AsyncGenerator[bytes]:
        """The body of ``response``; then, while it has ended between events without the answer after the
        server named an event id, what a GET with that ``Last-Event-ID`` brings (2025-11-25, "Resumability
        and Redelivery": "the client MAY ... issue an HTTP GET to the MCP endpoint, and include the
        Last-Event-ID header"). A server that closes the stream to be polled is answered this way."""
        try:
            async for chunk in response.aiter_bytes():
                yield chunk
        except httpx.HTTPError:
            if not _resumable(lines, answered):
                raise
        failures = 0
        while isinstance(lines, SseLines) and _resumable(lines, answered) and not self._closed:
            retry = lines.retry_ms / 1000 if lines.retry_ms is not None else RESUME_DELAY_DEFAULT
            await asyncio.sleep(retry)
            headers = {
                **self._headers,
                "accept": "text/event-stream",
                "last-event-id": str(lines.last_event_id),
            }
            if self._session_id:
                headers[MCP_SESSION_ID] = self._session_id
            if self._version:
                headers[MCP_PROTOCOL_VERSION_HEADER] = self._version
            try:
                async with self._client.stream("GET", self.url, headers=headers) as again:
                    kind = again.headers.get("content-type", "").split(";")[0].strip()
                    if again.status_code < 300 and kind == "text/event-stream":
                        failures = 0
                        async for chunk in again.aiter_bytes():
                            yield chunk
                    else:
                        failures += 1
            except httpx.HTTPError as exc:
                logger.warning(
                    "upstream %s: resuming an answer failed: %s", self.description, type(exc).__name__
                )
                failures += 1
            if failures >= RESUME_ATTEMPTS:
                return

    async def _http_error(self, response: httpx.Response, message: Mapping[str, Any]) -> None:
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) >= ERROR_BODY_MAX:
                break
        if "id" in message and "method" in message:
            try:
                parsed = json.loads(body)
                if isinstance(parsed, dict) and "error" in parsed and "id" in parsed:
                    await self._inbox.put(Whole(bytes(body).strip()))
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

    async def _fail(self) -> None:
        await self._inbox.end()

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

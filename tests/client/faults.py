"""A transport in front of the in-process app that records requests and injects network faults.

The faults are what a real network does and a real server cannot be asked to do on cue: refuse a connection,
lose a response after the server acted on the request, cut a body midway, answer 503/429 from a proxy.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import httpx

Match = Callable[[httpx.Request], bool]


def chunk_put(index: int | None = None) -> Match:
    def match(request: httpx.Request) -> bool:
        parts = request.url.path.split("/")
        return request.method == "PUT" and "chunks" in parts and (index is None or parts[-1] == str(index))

    return match


def path_is(method: str, suffix: str) -> Match:
    return lambda request: request.method == method and request.url.path.endswith(suffix)


def content_get() -> Match:
    return lambda request: request.method == "GET" and request.url.path.endswith("/content")


@dataclass
class Fault:
    match: Match
    kind: str
    """``refuse`` (never reaches the server), ``lose`` (server acts, response lost), ``status`` (a proxy
    answers ``status``), ``cut`` (connection reset after ``after_bytes``), ``short`` (the body just ends
    after ``after_bytes``), ``norange`` (a proxy drops ``Range``)."""
    times: int = 1
    status: int = 503
    headers: dict[str, str] = field(default_factory=dict)
    after_bytes: int = 0


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class _CutStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, limit: int, *, clean_end: bool) -> None:
        self.inner = inner
        self.limit = limit
        self.clean_end = clean_end

    async def __aiter__(self) -> AsyncIterator[bytes]:
        sent = 0
        async for piece in self.inner:
            room = self.limit - sent
            if room <= 0:
                break
            yield piece[:room]
            sent += min(room, len(piece))
        if not self.clean_end:
            raise httpx.ReadError("connection reset by peer")

    async def aclose(self) -> None:
        await self.inner.aclose()


class FaultyTransport(httpx.AsyncBaseTransport):
    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.faults: list[Fault] = []
        self.seen: list[Seen] = []

    def add(self, fault: Fault) -> Fault:
        self.faults.append(fault)
        return fault

    def count(self, match: Match) -> int:
        return sum(1 for seen in self.seen if match(httpx.Request(seen.method, "http://t" + seen.path)))

    def chunk_indexes_put(self) -> list[int]:
        return [
            int(s.path.rsplit("/", 1)[1]) for s in self.seen if s.method == "PUT" and "/chunks/" in s.path
        ]

    def _take(self, request: httpx.Request) -> Fault | None:
        for fault in self.faults:
            if fault.times > 0 and fault.match(request):
                fault.times -= 1
                return fault
        return None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        self.seen.append(Seen(request.method, request.url.path, dict(request.headers), body))
        fault = self._take(request)
        if fault is not None and fault.kind == "refuse":
            raise httpx.ConnectError("connection refused", request=request)
        if fault is not None and fault.kind == "status":
            body = json.dumps({"code": "storage_unavailable", "detail": "try later"}).encode()
            headers = {"content-type": "application/problem+json", **fault.headers}
            return httpx.Response(fault.status, headers=headers, content=body, request=request)
        if fault is not None and fault.kind == "norange":
            del request.headers["range"]
        response = await self.inner.handle_async_request(request)
        if fault is not None and fault.kind == "lose":
            await response.aread()
            raise httpx.ReadError("connection reset by peer", request=request)
        if fault is not None and fault.kind in {"cut", "short"}:
            assert isinstance(response.stream, httpx.AsyncByteStream)
            return httpx.Response(
                response.status_code,
                headers=response.headers,
                stream=_CutStream(response.stream, fault.after_bytes, clean_end=fault.kind == "short"),
                request=request,
            )
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()

"""Building download responses from a :class:`~blobstore.api.conditional.DownloadPlan`.

Partial and windowed reads stream through ``ArtifactService.stream``, so every block they touch is
checked against its XXH3-128 before its bytes go out. A full 200 of a blob on local disk is handed to
Starlette's ``FileResponse``, which uses the ASGI ``http.response.pathsend`` extension (the server sends the
file itself, zero-copy) when the server offers it, or left to nginx by ``X-Accel-Redirect`` when the server
runs behind it so configured (``Settings.accel_redirect``); the strong ETag lets a client verify the whole
body by its SHA-256.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import anyio
from starlette.responses import FileResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from blobstore.api.conditional import DownloadPlan, Outcome, Representation
from blobstore.api.headers import http_date
from blobstore.disposition import content_disposition
from blobstore.errors import Corruption, NotFound
from blobstore.models import Artifact, BlobInfo
from blobstore.ranges import ByteRange, Window, strong_etag
from blobstore.service import ArtifactService

CACHE_CONTROL = "private, max-age=31536000, immutable"
ACCEL_REDIRECT = "x-accel-redirect"


@dataclass(frozen=True, slots=True)
class _Head:
    """What a download's head says of one artifact, formatted once. None of it changes for an artifact: the
    content is addressed by its hash, the id fixes the creation time, and the name and type are part of the
    key. The same few artifacts are read again and again, so this is kept (bounded) instead of formatted
    per request."""

    representation: Representation
    validators: tuple[tuple[str, str], ...]
    content: tuple[tuple[str, str], ...]
    encoded: tuple[tuple[bytes, bytes], ...]
    """``content`` and the ``content-type``, encoded as a response's raw headers."""


_HEADS: dict[tuple[str, str, str, str], _Head] = {}
_MAX_HEADS = 1024


def _head(artifact: Artifact) -> _Head:
    key = (artifact.id, artifact.sha256, artifact.name, artifact.mime_type)
    head = _HEADS.get(key)
    if head is None:
        head = _format_head(artifact)
        if len(_HEADS) >= _MAX_HEADS:
            _HEADS.clear()
        _HEADS[key] = head
    return head


def _format_head(artifact: Artifact) -> _Head:
    rep = Representation(
        size=artifact.size,
        etag=strong_etag(artifact.sha256),
        last_modified=artifact.created_at,
        last_modified_http=http_date(artifact.created_at),
    )
    validators = (
        ("etag", rep.etag),
        ("last-modified", rep.last_modified_http),
        ("cache-control", CACHE_CONTROL),
    )
    content = (
        *validators,
        ("accept-ranges", "bytes"),
        ("content-disposition", content_disposition(artifact.name)),
        # User content served from the API origin: never let a browser sniff or run it.
        ("x-content-type-options", "nosniff"),
        ("content-security-policy", "sandbox"),
    )
    encoded = tuple(
        (name.encode("latin-1"), value.encode("latin-1"))
        for name, value in (*content, ("content-type", artifact.mime_type))
    )
    return _Head(rep, validators, content, encoded)


def representation(artifact: Artifact) -> Representation:
    return _head(artifact).representation


def validator_headers(artifact: Artifact) -> dict[str, str]:
    return dict(_head(artifact).validators)


def content_headers(artifact: Artifact) -> dict[str, str]:
    return dict(_head(artifact).content)


class _Prepared(Response):
    """A response whose head is encoded already (a range read with its lookup: the hot path)."""

    def __init__(self, status: int, raw_headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        self.status_code = status
        self.raw_headers = raw_headers
        self.body = body
        self.background = None


async def _chained(first: bytes | None, source: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    if first is None:
        return
    yield first
    async for piece in source:
        yield piece


async def _primed(source: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Pull the first piece before the response starts: a missing or corrupt first chunk is a clean error."""
    return _chained(await anext(source, None), source)


class _WholeFileResponse(FileResponse):
    """``FileResponse`` for a plain 200: the range decision is made, so Starlette must not redo it."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kept = [(k, v) for k, v in scope["headers"] if k not in (b"range", b"if-range")]
        await super().__call__({**scope, "headers": kept}, receive, send)


async def _checked_stat(path: Path, size: int) -> os.stat_result:
    try:
        stat_result = await anyio.to_thread.run_sync(os.stat, path)
    except FileNotFoundError:
        raise NotFound() from None
    if stat_result.st_size != size:
        raise Corruption("stored object has the wrong size")
    return stat_result


async def _file_response(path: Path, headers: dict[str, str], size: int) -> Response:
    return _WholeFileResponse(path, headers=headers, stat_result=await _checked_stat(path, size))


async def _accel_response(path: Path, location: str, headers: dict[str, str], size: int) -> Response:
    """A 200 without a body that tells nginx to send the file at ``location`` (its ``internal`` location).

    nginx sends the file with its own ``Content-Length``; this answer declares none of the file's, since
    it carries no body (a length without the bytes would break the kept-alive upstream connection). The
    shipped location (``deploy/nginx-single.conf``) turns off nginx's own validators and ranges and passes
    this answer's ``ETag``, ``Last-Modified`` and security headers on."""
    await _checked_stat(path, size)
    kept = {name: value for name, value in headers.items() if name != "content-length"}
    return Response(status_code=200, headers={**kept, ACCEL_REDIRECT: location})


def _multipart_layout(
    ranges: list[ByteRange], size: int, mime_type: str, boundary: str
) -> tuple[list[bytes], bytes, int]:
    heads = [
        (
            f"--{boundary}\r\nContent-Type: {mime_type}\r\nContent-Range: {item.content_range(size)}\r\n\r\n"
        ).encode("latin-1")
        for item in ranges
    ]
    tail = f"--{boundary}--\r\n".encode("latin-1")
    length = sum(len(head) + item.length + 2 for head, item in zip(heads, ranges, strict=True)) + len(tail)
    return heads, tail, length


async def _multipart_body(
    service: ArtifactService, blob: BlobInfo, ranges: list[ByteRange], heads: list[bytes], tail: bytes
) -> AsyncIterator[bytes]:
    first = await _primed(service.stream(blob, ranges[0].start, ranges[0].end))

    async def body() -> AsyncIterator[bytes]:
        for position, (head, item) in enumerate(zip(heads, ranges, strict=True)):
            yield head
            source = first if position == 0 else service.stream(blob, item.start, item.end)
            async for piece in source:
                yield piece
            yield b"\r\n"
        yield tail

    return body()


def window_headers(artifact_id: str, win: Window) -> dict[str, str]:
    headers = {
        "x-blobstore-offset": str(win.offset),
        "x-blobstore-length": str(win.length),
        "x-blobstore-size": str(win.size),
        "x-blobstore-eof": "true" if win.eof else "false",
    }
    if not win.eof:
        headers["x-blobstore-next-offset"] = str(win.end)
        headers["link"] = (
            f'</v1/artifacts/{artifact_id}/content?offset={win.end}&length={win.length}>; rel="next"'
        )
    return headers


def read_at_once(plan: DownloadPlan, limit: int) -> tuple[int, int] | None:
    """The span of a single range or window of at most ``limit`` bytes (what an MCP window may hold), to read
    whole with the lookup; None for anything else, which streams."""
    if plan.outcome is Outcome.PARTIAL:
        first = plan.ranges[0]
        return (first.start, first.end) if first.length <= limit else None
    if plan.outcome is Outcome.WINDOW:
        assert plan.window is not None
        win = plan.window
        return (win.offset, win.end) if 0 < win.length <= limit else None
    return None


async def build_download(
    service: ArtifactService,
    artifact: Artifact,
    blob: BlobInfo,
    plan: DownloadPlan,
    *,
    head: bool,
    data: bytes | None = None,
    accel: str | None = None,
) -> Response:
    """The response for ``plan``; ``data``: the verified span :func:`read_at_once` chose, when it was read;
    ``accel``: the prefix of nginx's internal location when a whole file on local disk may be left to it."""
    size = artifact.size
    if data is not None and plan.outcome is Outcome.PARTIAL and not head:
        # The hot path, a range read with its lookup: the head is encoded already but for the range's own two.
        span = plan.ranges[0]
        raw = [
            *_head(artifact).encoded,
            (b"content-range", span.content_range(size).encode("latin-1")),
            (b"content-length", str(span.length).encode("latin-1")),
        ]
        return _Prepared(206, raw, data)
    headers = content_headers(artifact)
    if plan.outcome is Outcome.NOT_MODIFIED:
        return Response(status_code=304, headers=validator_headers(artifact))

    if plan.outcome is Outcome.MULTIPART:
        boundary = secrets.token_hex(16)
        heads, tail, length = _multipart_layout(plan.ranges, size, artifact.mime_type, boundary)
        headers["content-type"] = f"multipart/byteranges; boundary={boundary}"
        headers["content-length"] = str(length)
        if head:
            return Response(status_code=206, headers=headers)
        return StreamingResponse(
            await _multipart_body(service, blob, plan.ranges, heads, tail), status_code=206, headers=headers
        )

    headers["content-type"] = artifact.mime_type
    if plan.outcome is Outcome.FULL:
        start, end, status = 0, size, 200
    elif plan.outcome is Outcome.PARTIAL:
        start, end, status = plan.ranges[0].start, plan.ranges[0].end, 206
    else:
        assert plan.window is not None
        win = plan.window
        headers.update(window_headers(artifact.id, win))
        # An empty window (offset == size) has no Content-Range form: it is a 200 with an empty body.
        start, end, status = win.offset, win.end, 206 if win.length else 200
    if status == 206:
        headers["content-range"] = ByteRange(start, end).content_range(size)
    headers["content-length"] = str(end - start)
    if head:
        return Response(status_code=status, headers=headers)
    if plan.outcome is Outcome.FULL:
        path = service.local_path(blob)
        if path is not None:
            if accel is not None:
                return await _accel_response(path, accel + blob.key, headers, size)
            return await _file_response(path, headers, size)
    if start == end:
        return Response(status_code=status, headers=headers)
    if data is not None:
        return Response(data, status_code=status, headers=headers)
    source = service.stream(blob, start, end)
    first = await anext(source, None)
    if first is not None and len(first) == end - start and await anext(source, None) is None:
        # The whole range came from one storage chunk (a small range or window): a plain response, without
        # the task group and disconnect listener a StreamingResponse runs per request. The second pull ends
        # the source, which closes its file.
        return Response(first, status_code=status, headers=headers)
    return StreamingResponse(_chained(first, source), status_code=status, headers=headers)

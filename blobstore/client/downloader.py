"""Ranged, resumable downloads into ``<dest>.part``, verified, then renamed into place.

A ``<dest>.part.json`` marker records which artifact, ETag and window the partial file holds, so a later run
resumes only into bytes of the same representation: it asks for ``Range`` from the partial file's length with
``If-Range`` set to that ETag, and a server that no longer matches answers with the whole body instead.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, BinaryIO

import anyio
import httpx

from blobstore.client.api import BlobstoreApi
from blobstore.client.chunks import ProgressTracker
from blobstore.client.problems import error_from_response, local_file_error, unreachable
from blobstore.client.results import ArtifactInfo, DownloadResult, ProgressCallback
from blobstore.client.retry import RetryableResponse, is_retryable_status, retry_after_seconds
from blobstore.errors import Conflict, DigestMismatch, InvalidRange, RangeNotSatisfiable, StorageUnavailable

_WRITE_BLOCK = 1024 * 1024
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


@dataclass(frozen=True, slots=True)
class PartMarker:
    artifact_id: str
    etag: str
    start: int
    end: int


class PartFile:
    """The partial download on disk: blocking methods, called in a worker thread."""

    def __init__(self, dest: Path, marker: PartMarker, *, whole: bool) -> None:
        self.dest = dest
        self.path = dest.with_name(dest.name + ".part")
        self.marker_path = dest.with_name(dest.name + ".part.json")
        self.marker = marker
        self.hasher = hashlib.sha256() if whole else None
        self.handle: BinaryIO | None = None
        self.length = 0
        """Bytes in the partial file, all of them valid."""

    @property
    def offset(self) -> int:
        """Position in the artifact of the next byte to fetch."""
        return self.marker.start + self.length

    def open(self, resume: bool) -> int:
        """Open for appending and return how many bytes are already there (0 unless resuming)."""
        length = self.marker.end - self.marker.start
        kept = self._resumable_length() if resume else 0
        if kept > length:
            kept = 0
        self.handle = self.path.open("r+b" if kept else "wb")
        self.handle.truncate(kept)
        if self.hasher is not None and kept:
            self.handle.seek(0)
            while block := self.handle.read(_WRITE_BLOCK):
                self.hasher.update(block)
        self.handle.seek(kept)
        if not kept:
            self.marker_path.write_text(json.dumps(asdict(self.marker)), encoding="utf-8")
        self.length = kept
        return kept

    def _resumable_length(self) -> int:
        try:
            saved = json.loads(self.marker_path.read_text(encoding="utf-8"))
            if PartMarker(**saved) != self.marker:
                return 0
            return self.path.stat().st_size
        except (OSError, ValueError, TypeError):
            return 0

    def restart(self) -> None:
        assert self.handle is not None
        self.handle.seek(0)
        self.handle.truncate(0)
        self.length = 0
        if self.hasher is not None:
            self.hasher = hashlib.sha256()

    def write(self, data: bytes) -> None:
        assert self.handle is not None
        self.handle.write(data)
        self.length += len(data)
        if self.hasher is not None:
            self.hasher.update(data)

    def finish(self, expected_sha256: str | None) -> None:
        """fsync, check the digest, rename into place; on a digest mismatch the partial file is discarded."""
        assert self.handle is not None
        self.handle.flush()
        os.fsync(self.handle.fileno())
        self.handle.close()
        self.handle = None
        if (
            expected_sha256 is not None
            and self.hasher is not None
            and self.hasher.hexdigest() != expected_sha256
        ):
            self.discard()
            raise DigestMismatch("downloaded bytes do not match the artifact's sha256")
        os.replace(self.path, self.dest)
        self.marker_path.unlink(missing_ok=True)
        directory = os.open(self.dest.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None

    def discard(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)
        self.marker_path.unlink(missing_ok=True)


def resolve_window(size: int, window: tuple[int, int] | None) -> tuple[int, int]:
    """``window`` is half-open ``(start, end)``; ``None`` means the whole artifact."""
    if window is None:
        return 0, size
    start, end = window
    if start < 0 or end < start:
        raise InvalidRange("range must satisfy 0 <= start <= end")
    if end == start:
        # The rule of the HTTP and MCP windows: a zero length is refused, not answered with nothing.
        raise InvalidRange("length must be > 0")
    if end > size:
        raise RangeNotSatisfiable(f"range ends past the artifact's size {size}")
    return start, end


def destination(path: Path, artifact: ArtifactInfo) -> Path:
    if path.is_dir():
        # Only the final component of the server-side name: it must not steer the write elsewhere.
        name = Path(artifact.name).name or artifact.id
        if name in {".", ".."}:
            name = artifact.id
        return path / name
    return path


class Downloader:
    def __init__(
        self, api: BlobstoreApi, limiter: anyio.CapacityLimiter, direct_http: httpx.AsyncClient | None = None
    ) -> None:
        self.api = api
        self.limiter = limiter
        self.direct_http = direct_http

    @contextlib.asynccontextmanager
    async def _content(
        self, artifact: ArtifactInfo, headers: dict[str, str]
    ) -> AsyncIterator[httpx.Response]:
        """The content response; a ``307`` to presigned storage URL is followed with the ``Range`` alone.

        The API has already evaluated ``If-Range``; the storage knows other validators. The request to the
        storage goes through the client without the token: the URL is the capability.
        """
        async with self.api.http.stream(
            "GET", f"/v1/artifacts/{artifact.id}/content", headers=headers
        ) as response:
            location = response.headers.get("location")
            if response.status_code != httpx.codes.TEMPORARY_REDIRECT or not location or not self.direct_http:
                yield response
                return
        async with self.direct_http.stream("GET", location, headers={"Range": headers["Range"]}) as response:
            yield response

    async def _thread(self, func: Any, *args: Any) -> Any:
        try:
            return await anyio.to_thread.run_sync(func, *args, limiter=self.limiter)
        except OSError as exc:
            raise local_file_error(exc) from exc

    async def download(
        self,
        artifact_id: str,
        path: Path,
        *,
        window: tuple[int, int] | None,
        progress: ProgressCallback | None,
        resume: bool,
    ) -> DownloadResult:
        artifact = await self.api.get_artifact(artifact_id)
        start, end = resolve_window(artifact.size, window)
        whole = (start, end) == (0, artifact.size)
        dest = destination(path, artifact)
        part = PartFile(dest, PartMarker(artifact.id, artifact.etag, start, end), whole=whole)
        kept: int = await self._thread(part.open, resume)
        tracker = ProgressTracker(progress, end - start, kept)
        try:
            await self._fetch(artifact, part, tracker)
            await self._thread(part.finish, artifact.sha256 if whole else None)
        finally:
            await self._thread(part.close)
        return DownloadResult(artifact, dest, start, end, end - start - kept, kept, verified=whole)

    async def _fetch(self, artifact: ArtifactInfo, part: PartFile, tracker: ProgressTracker) -> None:
        """Fill the partial file up to the window's end; a connection lost midway resumes from its length."""
        policy = self.api.retry
        tries = 0
        while part.offset < part.marker.end:
            tries += 1
            before = part.offset
            failure: BaseException
            try:
                await self._fetch_once(artifact, part, tracker)
            except (httpx.TransportError, RetryableResponse) as exc:
                failure = exc
            else:
                if part.offset >= part.marker.end:
                    return
                failure = StorageUnavailable("the server ended the download early")
            if part.offset > before:
                tries = 1
            if tries >= policy.attempts:
                if isinstance(failure, RetryableResponse):
                    raise error_from_response(failure.response) from None
                if isinstance(failure, StorageUnavailable):
                    raise failure
                raise unreachable(self.api.base_url) from failure
            retry_after = (
                retry_after_seconds(failure.response) if isinstance(failure, RetryableResponse) else None
            )
            await anyio.sleep(policy.delay(tries, retry_after))

    async def _fetch_once(self, artifact: ArtifactInfo, part: PartFile, tracker: ProgressTracker) -> None:
        end = part.marker.end
        headers = {"Range": f"bytes={part.offset}-{end - 1}", "If-Range": artifact.etag}
        async with self._content(artifact, headers) as response:
            if not response.is_success:
                await response.aread()
                if is_retryable_status(response):
                    raise RetryableResponse(response)
                raise error_from_response(response)
            skip = 0
            if response.status_code == httpx.codes.PARTIAL_CONTENT:
                match = _CONTENT_RANGE.fullmatch(response.headers.get("content-range", ""))
                if match is None or int(match.group(1)) != part.offset:
                    raise Conflict("server answered a different range than requested")
            else:
                # The whole representation came back (If-Range did not match): start the window over.
                await self._thread(part.restart)
                tracker.done = 0
                tracker.report()
                skip = part.marker.start
            pending = bytearray()
            try:
                async for piece in response.aiter_bytes():
                    view = memoryview(piece)
                    if skip:
                        dropped = min(skip, len(view))
                        skip -= dropped
                        view = view[dropped:]
                    pending += view[: end - part.offset - len(pending)]
                    if len(pending) >= _WRITE_BLOCK:
                        await self._flush(part, pending, tracker)
                    if part.offset + len(pending) >= end:
                        break
            finally:
                # Bytes that arrived before a cut are good: keep them so the retry starts after them.
                if pending:
                    await self._flush(part, pending, tracker)

    async def _flush(self, part: PartFile, pending: bytearray, tracker: ProgressTracker) -> None:
        data = bytes(pending)
        pending.clear()
        await self._thread(part.write, data)
        tracker.advance(len(data))

"""The asynchronous client: artifacts, resumable parallel uploads, resumable ranged downloads."""

from __future__ import annotations

import os
from collections.abc import AsyncIterable, AsyncIterator
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio
import httpx

from blobstore import __version__
from blobstore.client.api import BlobstoreApi
from blobstore.client.direct import new_direct_http
from blobstore.client.downloader import Downloader
from blobstore.client.results import (
    ArtifactInfo,
    ArtifactPage,
    DownloadResult,
    ProgressCallback,
    UploadResult,
    UploadSessionInfo,
    UploadStatusInfo,
)
from blobstore.client.retry import RetryPolicy
from blobstore.client.state import UploadStateStore
from blobstore.client.uploader import Uploader, UploadOptions

DEFAULT_URL = "http://127.0.0.1:8420"
DEFAULT_PARALLEL = 4
_IO_THREADS = 8

UploadSource = str | os.PathLike[str] | bytes | bytearray | memoryview | AsyncIterable[bytes]


class AsyncBlobstoreClient:
    """Talks to one blobstore server. Use as ``async with AsyncBlobstoreClient(url, token=…) as client:``.

    The token is sent as ``Authorization: Bearer`` and kept nowhere else: not in resume state, logs or errors.
    """

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        token: str | None = None,
        retry: RetryPolicy | None = None,
        parallel: int = DEFAULT_PARALLEL,
        state_store: UploadStateStore | None = None,
        timeout: float = 120.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.parallel = parallel
        headers = {"User-Agent": f"mcp-blobstore-client/{__version__}"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        limits = httpx.Limits(
            max_connections=max(parallel * 2, 10), max_keepalive_connections=max(parallel, 5)
        )
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
            limits=limits,
            transport=transport,
        )
        self.api = BlobstoreApi(self._http, self.base_url, retry or RetryPolicy())
        # Presigned storage URLs get a client of their own, without the token.
        self._direct_http = new_direct_http(timeout, parallel)
        limiter = anyio.CapacityLimiter(_IO_THREADS)
        self._uploader = Uploader(self.api, state_store or UploadStateStore(), limiter, self._direct_http)
        self._downloader = Downloader(self.api, limiter, self._direct_http)

    async def __aenter__(self) -> AsyncBlobstoreClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()
        await self._direct_http.aclose()

    # -- transfers ------------------------------------------------------------------------------------------

    async def upload(
        self,
        source: UploadSource,
        *,
        name: str | None = None,
        mime_type: str | None = None,
        ttl_seconds: int | None = None,
        metadata: dict[str, Any] | None = None,
        chunk_size: int | None = None,
        parallel: int | None = None,
        progress: ProgressCallback | None = None,
        resume: bool = True,
        direct: bool = True,
    ) -> UploadResult:
        """Upload a file path, bytes, or an async iterator of bytes in parallel chunks.

        A file upload keeps resume state in the user's cache until it completes, so running the same upload
        again after a crash sends only the chunks the server does not have. ``name`` defaults to the file name
        and is required for the other sources. With ``direct`` (the default) a file or bytes upload asks for
        presigned part URLs, and PUTs its parts straight to the storage when the server offers them.
        """
        options = UploadOptions(
            name=name,
            mime_type=mime_type,
            ttl_seconds=ttl_seconds,
            metadata=metadata,
            chunk_size=chunk_size,
            parallel=parallel or self.parallel,
            progress=progress,
            resume=resume,
            direct=direct,
        )
        if isinstance(source, str | os.PathLike):
            return await self._uploader.upload_file(Path(source), options)
        if isinstance(source, bytes | bytearray | memoryview):
            return await self._uploader.upload_bytes(source, options)
        return await self._uploader.upload_stream(source, options)

    async def download(
        self,
        artifact_id: str,
        path: str | os.PathLike[str],
        *,
        range: tuple[int, int] | None = None,
        progress: ProgressCallback | None = None,
        resume: bool = True,
    ) -> DownloadResult:
        """Download an artifact, or its bytes ``[start, end)`` with ``range=(start, end)``, to ``path``.

        An empty range (``start == end``) is refused (``InvalidRange``), as the server refuses ``length=0``.

        ``path`` may be a directory (the artifact's name is used inside it). Bytes arrive in ``<path>.part``,
        which a later call resumes; a whole download is checked against the artifact's SHA-256 before it is
        renamed into place.
        """
        return await self._downloader.download(
            artifact_id, Path(path), window=range, progress=progress, resume=resume
        )

    # -- artifacts ------------------------------------------------------------------------------------------

    async def get_artifact(self, artifact_id: str) -> ArtifactInfo:
        return await self.api.get_artifact(artifact_id)

    async def list_artifacts(self, *, limit: int | None = None, cursor: str | None = None) -> ArtifactPage:
        return await self.api.list_artifacts(limit=limit, cursor=cursor)

    async def iter_artifacts(self, *, page_size: int = 100) -> AsyncIterator[ArtifactInfo]:
        cursor: str | None = None
        while True:
            page = await self.api.list_artifacts(limit=page_size, cursor=cursor)
            for item in page.items:
                yield item
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    async def update_artifact(self, artifact_id: str, **changes: Any) -> ArtifactInfo:
        return await self.api.update_artifact(artifact_id, changes)

    async def delete_artifact(self, artifact_id: str) -> None:
        await self.api.delete_artifact(artifact_id)

    # -- the chunked-upload protocol, step by step ----------------------------------------------------------

    async def begin_upload(self, name: str, **fields: Any) -> UploadSessionInfo:
        return await self.api.begin_upload(name, **fields)

    async def put_chunk(self, upload_id: str, index: int, data: bytes) -> None:
        await self.api.put_chunk(upload_id, index, data)

    async def upload_status(self, upload_id: str) -> UploadStatusInfo:
        return await self.api.upload_status(upload_id)

    async def complete_upload(self, upload_id: str, sha256: str | None = None) -> ArtifactInfo:
        return await self.api.complete_upload(upload_id, sha256)

    async def abort_upload(self, upload_id: str) -> None:
        await self.api.abort_upload(upload_id)

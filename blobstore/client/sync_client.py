"""A blocking wrapper around :class:`AsyncBlobstoreClient`, running it on an event loop in a helper thread."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from functools import partial
from types import TracebackType
from typing import Any, TypeVar

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal

from blobstore.client.async_client import DEFAULT_URL, AsyncBlobstoreClient
from blobstore.client.results import (
    ArtifactInfo,
    ArtifactPage,
    DownloadResult,
    ProgressCallback,
    UploadResult,
    UploadSessionInfo,
    UploadStatusInfo,
)

T = TypeVar("T")
_END = object()

SyncUploadSource = str | os.PathLike[str] | bytes | bytearray | memoryview | Iterable[bytes]


class BlobstoreClient:
    """Same methods as the async client, blocking. Use as a context manager, or call :meth:`close`.

    Progress callbacks run on the helper thread.
    """

    def __init__(self, base_url: str = DEFAULT_URL, **options: Any) -> None:
        self._portal_cm: AbstractContextManager[BlockingPortal] = start_blocking_portal()
        self._portal = self._portal_cm.__enter__()
        try:
            self._client: AsyncBlobstoreClient = self._portal.call(partial(_make_client, base_url, options))
        except BaseException:
            self._portal_cm.__exit__(None, None, None)
            raise

    def __enter__(self) -> BlobstoreClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        try:
            self._portal.call(self._client.aclose)
        finally:
            self._portal_cm.__exit__(None, None, None)

    def _call(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return self._portal.call(partial(func, *args, **kwargs))

    @property
    def base_url(self) -> str:
        return self._client.base_url

    def upload(self, source: SyncUploadSource, **options: Any) -> UploadResult:
        """See :meth:`AsyncBlobstoreClient.upload`; an iterable of bytes is read on a worker thread."""
        target: Any = source
        if not isinstance(source, str | os.PathLike | bytes | bytearray | memoryview):
            target = _async_iter(iter(source))
        result: UploadResult = self._call(self._client.upload, target, **options)
        return result

    def download(
        self,
        artifact_id: str,
        path: str | os.PathLike[str],
        *,
        range: tuple[int, int] | None = None,
        progress: ProgressCallback | None = None,
        resume: bool = True,
    ) -> DownloadResult:
        result: DownloadResult = self._call(
            self._client.download, artifact_id, path, range=range, progress=progress, resume=resume
        )
        return result

    def get_artifact(self, artifact_id: str) -> ArtifactInfo:
        result: ArtifactInfo = self._call(self._client.get_artifact, artifact_id)
        return result

    def list_artifacts(self, *, limit: int | None = None, cursor: str | None = None) -> ArtifactPage:
        result: ArtifactPage = self._call(self._client.list_artifacts, limit=limit, cursor=cursor)
        return result

    def iter_artifacts(self, *, page_size: int = 100) -> Iterator[ArtifactInfo]:
        cursor: str | None = None
        while True:
            page = self.list_artifacts(limit=page_size, cursor=cursor)
            yield from page.items
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def update_artifact(self, artifact_id: str, **changes: Any) -> ArtifactInfo:
        result: ArtifactInfo = self._call(self._client.update_artifact, artifact_id, **changes)
        return result

    def delete_artifact(self, artifact_id: str) -> None:
        self._call(self._client.delete_artifact, artifact_id)

    def begin_upload(self, name: str, **fields: Any) -> UploadSessionInfo:
        result: UploadSessionInfo = self._call(self._client.begin_upload, name, **fields)
        return result

    def put_chunk(self, upload_id: str, index: int, data: bytes) -> None:
        self._call(self._client.put_chunk, upload_id, index, data)

    def upload_status(self, upload_id: str) -> UploadStatusInfo:
        result: UploadStatusInfo = self._call(self._client.upload_status, upload_id)
        return result

    def complete_upload(self, upload_id: str, sha256: str | None = None) -> ArtifactInfo:
        result: ArtifactInfo = self._call(self._client.complete_upload, upload_id, sha256)
        return result

    def abort_upload(self, upload_id: str) -> None:
        self._call(self._client.abort_upload, upload_id)


async def _make_client(base_url: str, options: dict[str, Any]) -> AsyncBlobstoreClient:
    return AsyncBlobstoreClient(base_url, **options)


async def _async_iter(source: Iterator[bytes]) -> AsyncIterator[bytes]:
    while True:
        piece = await anyio.to_thread.run_sync(next, source, _END)
        if piece is _END:
            return
        assert isinstance(piece, bytes | bytearray | memoryview)
        yield bytes(piece)

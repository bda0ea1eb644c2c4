"""A blocking wrapper around :class:`AsyncBlobstoreClient`, running it on an event loop in a helper thread."""

from __future__ import annotations

import functools
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from functools import partial
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal

from blobstore.client.async_client import DEFAULT_URL, AsyncBlobstoreClient
from blobstore.client.results import ArtifactInfo, UploadResult, UploadSessionInfo

T = TypeVar("T")
P = ParamSpec("P")
_END = object()

SyncUploadSource = str | os.PathLike[str] | bytes | bytearray | memoryview | Iterable[bytes]


def _blocking(
    method: Callable[Concatenate[AsyncBlobstoreClient, P], Awaitable[T]],
) -> Callable[Concatenate[BlobstoreClient, P], T]:
    """The blocking form of an async client method: the same parameters, the call run on the portal."""

    def call(self: BlobstoreClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._portal.call(partial(method, self._client, *args, **kwargs))

    functools.update_wrapper(call, method)  # its name and docstring
    return call


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

    download = _blocking(AsyncBlobstoreClient.download)
    get_artifact = _blocking(AsyncBlobstoreClient.get_artifact)
    list_artifacts = _blocking(AsyncBlobstoreClient.list_artifacts)

    def iter_artifacts(self, *, page_size: int = 100) -> Iterator[ArtifactInfo]:
        cursor: str | None = None
        while True:
            page = self.list_artifacts(limit=page_size, cursor=cursor)
            yield from page.items
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    # Written out: beside a keyword catch-all, the async method's ``self`` could be passed by keyword, which
    # the signature ``_blocking`` gives its wrappers does not allow.
    def update_artifact(self, artifact_id: str, **changes: Any) -> ArtifactInfo:
        result: ArtifactInfo = self._call(self._client.update_artifact, artifact_id, **changes)
        return result

    def begin_upload(self, name: str, **fields: Any) -> UploadSessionInfo:
        result: UploadSessionInfo = self._call(self._client.begin_upload, name, **fields)
        return result

    delete_artifact = _blocking(AsyncBlobstoreClient.delete_artifact)
    put_chunk = _blocking(AsyncBlobstoreClient.put_chunk)
    upload_status = _blocking(AsyncBlobstoreClient.upload_status)
    complete_upload = _blocking(AsyncBlobstoreClient.complete_upload)
    abort_upload = _blocking(AsyncBlobstoreClient.abort_upload)


async def _make_client(base_url: str, options: dict[str, Any]) -> AsyncBlobstoreClient:
    return AsyncBlobstoreClient(base_url, **options)


async def _async_iter(source: Iterator[bytes]) -> AsyncIterator[bytes]:
    while True:
        piece = await anyio.to_thread.run_sync(next, source, _END)
        if piece is _END:
            return
        assert isinstance(piece, bytes | bytearray | memoryview)
        yield bytes(piece)

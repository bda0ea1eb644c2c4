"""Upload orchestration for the three sources: a file (resumable across crashes), bytes, an async iterator."""

from __future__ import annotations

import hashlib
import mimetypes
import os
from collections.abc import AsyncIterable, Iterable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx
from anyio.streams.memory import MemoryObjectReceiveStream

from blobstore.client.api import BlobstoreApi
from blobstore.client.chunks import (
    ChunkCounter,
    ChunkFeed,
    OrderedDigest,
    ProgressTracker,
    chunk_count,
    chunk_length,
    read_exact,
    run_concurrently,
    send_indexed_chunks,
    sha256_of_file,
    slice_with_digest,
)
from blobstore.client.direct import DirectSender, part_urls
from blobstore.client.problems import local_file_error
from blobstore.client.results import ArtifactInfo, ProgressCallback, UploadResult, UploadStatusInfo
from blobstore.client.state import FileIdentity, ResumeState, UploadStateStore
from blobstore.digests import xxh3_hex
from blobstore.errors import InvalidRequest, NotFound, UploadNotOpen

_FINISHED = frozenset({"completed", "completing"})


@dataclass(frozen=True, slots=True)
class UploadOptions:
    name: str | None = None
    mime_type: str | None = None
    ttl_seconds: int | None = None
    metadata: dict[str, Any] | None = None
    chunk_size: int | None = None
    parallel: int = 4
    progress: ProgressCallback | None = None
    resume: bool = True
    direct: bool = True
    """Ask for presigned part URLs; the parts go straight to the storage when the server offers them."""


class Uploader:
    def __init__(
        self,
        api: BlobstoreApi,
        store: UploadStateStore,
        limiter: anyio.CapacityLimiter,
        direct_http: httpx.AsyncClient | None = None,
    ) -> None:
        self.api = api
        self.store = store
        self.limiter = limiter
        self.direct_http = direct_http

    async def _send_chunks(
        self,
        session: dict[str, Any],
        upload_id: str,
        indexes: Iterable[int],
        feed: ChunkFeed,
    ) -> dict[int, str] | None:
        """Chunks to the API, or, for a direct upload (``session["direct"]``), parts to the storage; returns
        the parts' ETags then, which the completion passes on."""
        if session.get("direct") and self.direct_http is not None:
            sender = DirectSender(
                self.api, self.direct_http, upload_id, part_urls(session.get("direct_parts"))
            )
            await sender.send(indexes, feed)
            return sender.etags
        await send_indexed_chunks(self.api, upload_id, indexes, feed)
        return None

    async def _thread(self, func: Any, *args: Any) -> Any:
        return await anyio.to_thread.run_sync(func, *args, limiter=self.limiter)

    # -- files ----------------------------------------------------------------------------------------------

    async def upload_file(self, path: Path, options: UploadOptions) -> UploadResult:
        try:
            identity: FileIdentity = await self._thread(FileIdentity.of, self.api.base_url, path)
        except OSError as exc:
            raise InvalidRequest(f"cannot read {path.name}") from exc
        state: ResumeState | None = await self._thread(self.store.load, identity) if options.resume else None
        if state is not None:
            try:
                return await self._resume(path, state, options)
            except (NotFound, UploadNotOpen):
                # The server no longer has a usable session (expired, aborted, purged): start over.
                pass
            await self._thread(self.store.remove, identity)
        return await self._fresh_file(path, identity, options)

    async def _resume(self, path: Path, state: ResumeState, options: UploadOptions) -> UploadResult:
        status = await self.api.upload_status(state.upload_id)
        if state.sha256 is None:
            # Some chunks are on the server already and will not be read again: hash the whole file.
            state = replace(state, sha256=await self._hash_file(path))
        if status.state in _FINISHED:
            artifact = await self.api.complete_upload(state.upload_id, state.sha256)
            await self._thread(self.store.remove, state.identity)
            count = chunk_count(state.identity.size, state.chunk_size)
            return UploadResult(artifact, state.upload_id, state.chunk_size, 0, count, 0, resumed=True)
        if status.state != "open":
            raise UploadNotOpen(f"upload is {status.state}")
        return await self._send_file(path, state, status, options, status.raw)

    async def _hash_file(self, path: Path) -> str:
        try:
            sha256: str = await self._thread(sha256_of_file, path)
        except OSError as exc:
            raise local_file_error(exc) from exc
        return sha256

    async def _fresh_file(self, path: Path, identity: FileIdentity, options: UploadOptions) -> UploadResult:
        begin = partial(
            self.api.begin_upload,
            options.name or path.name,
            mime_type=options.mime_type or mimetypes.guess_type(path.name)[0],
            size=identity.size,
            chunk_size=options.chunk_size,
            ttl_seconds=options.ttl_seconds,
            metadata=options.metadata,
            direct=options.direct,
        )
        # The digest is only needed up front for a direct upload: otherwise the chunks are hashed as they are
        # read and sent, and the digest is declared at the completion, which saves a whole pass over the file.
        session = await begin()
        sha256: str | None = None
        if options.direct and session.raw.get("direct_offered") and identity.size > 0:
            await self.api.abort_upload(session.upload_id)
            sha256 = await self._hash_file(path)
            session = await begin(sha256=sha256)
        state = ResumeState(session.upload_id, session.chunk_size, sha256, identity)
        if options.resume:
            await self._thread(self.store.save, state)
        return await self._send_file(path, state, None, options, session.raw)

    async def _send_file(
        self,
        path: Path,
        state: ResumeState,
        status: UploadStatusInfo | None,
        options: UploadOptions,
        session: dict[str, Any],
    ) -> UploadResult:
        size, chunk_size = state.identity.size, state.chunk_size
        count = chunk_count(size, chunk_size)
        have = {i for i in (status.chunks_received if status else ()) if i < count}
        todo = [i for i in range(count) if i not in have]
        already = sum(chunk_length(i, size, chunk_size) for i in have)
        progress = ProgressTracker(options.progress, size, already)
        counter = ChunkCounter()
        try:
            fd: int = await self._thread(os.open, str(path), os.O_RDONLY)
        except OSError as exc:
            raise local_file_error(exc) from exc

        # A fresh upload that did not hash first sends every chunk: its digest comes from them.
        digest = OrderedDigest(count, self._thread) if state.sha256 is None and not have else None

        async def read(index: int) -> tuple[bytes, str]:
            length = chunk_length(index, size, chunk_size)
            try:
                result: tuple[bytes, str] = await self._thread(read_exact, fd, index * chunk_size, length)
            except OSError as exc:
                raise local_file_error(exc) from exc
            if digest is not None:
                await digest.add(index, result[0])
            return result

        try:
            etags = await self._send_chunks(
                session, state.upload_id, todo, ChunkFeed(read, options.parallel, progress, counter)
            )
        finally:
            await self._thread(os.close, fd)
        sha256 = digest.hexdigest() if digest is not None else state.sha256
        artifact = await self.api.complete_upload(state.upload_id, sha256, etags)
        if options.resume:
            await self._thread(self.store.remove, state.identity)
        return UploadResult(
            artifact,
            state.upload_id,
            chunk_size,
            counter.chunks,
            len(have),
            counter.bytes,
            status is not None,
        )

    # -- bytes ----------------------------------------------------------------------------------------------

    async def upload_bytes(
        self, data: bytes | bytearray | memoryview, options: UploadOptions
    ) -> UploadResult:
        name = _required_name(options)
        view = memoryview(data).cast("B")
        size = len(view)
        sha256: str = await self._thread(lambda: hashlib.sha256(view).hexdigest())
        session = await self.api.begin_upload(
            name,
            mime_type=options.mime_type,
            size=size,
            sha256=sha256,
            chunk_size=options.chunk_size,
            ttl_seconds=options.ttl_seconds,
            metadata=options.metadata,
            direct=options.direct,
        )
        chunk_size = session.chunk_size
        progress = ProgressTracker(options.progress, size)
        counter = ChunkCounter()

        async def read(index: int) -> tuple[bytes, str]:
            length = chunk_length(index, size, chunk_size)
            result: tuple[bytes, str] = await self._thread(
                slice_with_digest, view, index * chunk_size, length
            )
            return result

        etags = await self._send_chunks(
            session.raw,
            session.upload_id,
            range(chunk_count(size, chunk_size)),
            ChunkFeed(read, options.parallel, progress, counter),
        )
        artifact = await self.api.complete_upload(session.upload_id, sha256, etags)
        return UploadResult(artifact, session.upload_id, chunk_size, counter.chunks, 0, counter.bytes, False)

    # -- async iterators ------------------------------------------------------------------------------------

    async def upload_stream(self, source: AsyncIterable[bytes], options: UploadOptions) -> UploadResult:
        """Upload bytes of unknown length: chunks are cut as the iterator yields and sent while it runs.

        Memory stays at about ``parallel + 2`` chunks: the producer blocks until a sender is free.
        """
        name = _required_name(options)
        session = await self.api.begin_upload(
            name,
            mime_type=options.mime_type,
            chunk_size=options.chunk_size,
            ttl_seconds=options.ttl_seconds,
            metadata=options.metadata,
        )
        chunk_size = session.chunk_size
        digest = hashlib.sha256()
        progress = ProgressTracker(options.progress, 0)
        counter = ChunkCounter()
        send, receive = anyio.create_memory_object_stream[tuple[int, bytes]](0)

        async def produce() -> None:
            async with send:
                index = 0
                buffer = bytearray()
                async for piece in source:
                    buffer += piece
                    while len(buffer) >= chunk_size:
                        chunk = bytes(buffer[:chunk_size])
                        del buffer[:chunk_size]
                        await self._thread(digest.update, chunk)
                        progress.total += len(chunk)
                        await send.send((index, chunk))
                        index += 1
                if buffer:
                    chunk = bytes(buffer)
                    await self._thread(digest.update, chunk)
                    progress.total += len(chunk)
                    await send.send((index, chunk))

        async def consume(stream: MemoryObjectReceiveStream[tuple[int, bytes]]) -> None:
            async with stream:
                async for index, chunk in stream:
                    chunk_xxh3: str = await self._thread(xxh3_hex, chunk)
                    await self.api.put_chunk(session.upload_id, index, chunk, xxh3=chunk_xxh3)
                    counter.chunks += 1
                    counter.bytes += len(chunk)
                    progress.advance(len(chunk))

        receivers = [receive.clone() for _ in range(max(1, options.parallel))]
        receive.close()
        await run_concurrently([produce, *(partial(consume, stream) for stream in receivers)])
        artifact: ArtifactInfo = await self.api.complete_upload(session.upload_id, digest.hexdigest())
        return UploadResult(artifact, session.upload_id, chunk_size, counter.chunks, 0, counter.bytes, False)


def _required_name(options: UploadOptions) -> str:
    if not options.name:
        raise InvalidRequest("a name is required when uploading bytes or a stream")
    return options.name

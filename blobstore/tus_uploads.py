"""tus uploads on top of the chunked-upload state machine: bytes at any offset and length onto fixed chunks.

A tus PATCH carries whatever length the client chose, but a staged chunk must be exactly ``chunk_size`` bytes
(only the last may be shorter). So a PATCH first completes the pending *tail*, stages every full chunk
through :meth:`~blobstore.upload_sessions.UploadManager.put_chunk`, and keeps the remainder (shorter than a
chunk) as the new tail, durably, in the metadata (``upload_tails``). The tus offset is
``full_chunks * chunk_size + len(tail)``.
A tail row whose offset a staged chunk already covers is stale (a crash between staging a chunk and writing
the tail) and ignored, so the offset never counts a byte twice.

Tail writes are a compare-and-set on the end of the tail that was read, so of two PATCHes at the same offset
only one wins. Within one process, requests for one upload also take turns, and a newer PATCH or DELETE
preempts the one holding the upload (like tusd; :mod:`blobstore.upload_locks`): the older request stops
reading its body, keeps what it received and ends.

An interrupted PATCH keeps what it received (tus: "The Server SHOULD always attempt to store as much of the
received data as possible"): full chunks already staged, plus the bytes read since, written before the request
ends. A PATCH with ``Upload-Checksum`` is different: its bytes are spooled to a temporary file and hashed, and
only a verified body is staged, because a staged chunk cannot be taken back.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterable, AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from blobstore.checksum_spool import BodyChecksum, ChecksumSpool
from blobstore.clock import Clock
from blobstore.config import Settings
from blobstore.errors import (
    BlobstoreError,
    Conflict,
    NotFound,
    TooLarge,
    UploadNotOpen,
)
from blobstore.models import Artifact, Caller, ChunkRecord, UploadSession, UploadState, UploadTail
from blobstore.records import TailRecords
from blobstore.upload_locks import UploadLocks
from blobstore.upload_sessions import UploadManager, check_not_expired

logger = logging.getLogger("blobstore.tus")

TUS_PROTOCOL = "tus"


@dataclass(frozen=True, slots=True)
class TusProgress:
    """How far a tus upload is, measured from its staged chunks and its tail."""

    session: UploadSession
    offset: int
    full_chunks: int
    """Staged chunks of exactly ``chunk_size`` bytes from index 0: the tail starts after them."""
    tail: bytes
    tail_end: int | None
    """End of the stored tail row as read (the compare-and-set token); None when there is no row."""

    @property
    def length(self) -> int | None:
        return self.session.declared_size

    @property
    def received_all(self) -> bool:
        return self.length is not None and self.offset == self.length


def measure(session: UploadSession, chunks: Sequence[ChunkRecord], tail: UploadTail | None) -> TusProgress:
    """The tus offset of ``session`` given its chunk rows and tail row."""
    chunk_size = session.chunk_size
    tail_end = tail.end if tail is not None else None
    if session.state in (UploadState.COMPLETING, UploadState.COMPLETED):
        # Every byte was staged before completion began; the staging may already be freed.
        return TusProgress(session, session.declared_size or 0, 0, b"", tail_end)
    staged = 0
    full = 0
    for position, chunk in enumerate(sorted(chunks, key=lambda c: c.index)):
        if chunk.index != position:
            break
        staged += chunk.size
        if chunk.size != chunk_size:
            break  # the short last chunk: nothing follows it
        full += 1
    data = b""
    if tail is not None and staged == full * chunk_size and tail.offset == staged:
        data = tail.data
    return TusProgress(session, staged + len(data), full, data, tail_end)


@dataclass(frozen=True, slots=True)
class Appended:
    progress: TusProgress
    artifact: Artifact | None
    """The completed upload's artifact once the last byte arrived."""


class TusUploads:
    """tus semantics (offsets, tails, completion on the last byte) over the chunked-upload state machine."""

    def __init__(
        self, *, settings: Settings, uploads: UploadManager, repo: TailRecords, clock: Clock
    ) -> None:
        self.uploads = uploads
        self.repo = repo
        self.clock = clock
        self.locks = UploadLocks()
        self.chunk_size = min(max(settings.tus_chunk_size, settings.min_chunk_size), settings.max_chunk_size)
        self.max_size = min(settings.max_artifact_size, self.chunk_size * settings.max_chunks_per_upload)
        self.spool = ChecksumSpool(settings.io_threads)

    async def create(
        self,
        caller: Caller,
        *,
        length: int,
        name: str,
        mime_type: str | None = None,
        sha256: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> UploadSession:
        if length > self.max_size:
            raise TooLarge(max_size=self.max_size)
        return await self.uploads.begin(
            caller,
            name=name,
            mime_type=mime_type,
            size=length,
            sha256=sha256,
            chunk_size=self.chunk_size,
            metadata=metadata,
            protocol=TUS_PROTOCOL,
        )

    async def progress(self, caller: Caller, upload_id: str) -> TusProgress:
        """The upload's offset; ``not_found`` for a missing, foreign or non-tus upload, ``upload_not_open``
        for an aborted or expired one.
        """
        session = await self.uploads.get(caller, upload_id)
        if session.protocol != TUS_PROTOCOL:
            raise NotFound()
        check_not_expired(session, self.clock())
        if session.state in (UploadState.ABORTED, UploadState.EXPIRED):
            raise UploadNotOpen(f"upload is {session.state.value}", state=session.state.value)
        return measure(session, await self.repo.list_chunks(session.id), await self.repo.get_tail(session.id))

    async def append(
        self,
        caller: Caller,
        upload_id: str,
        *,
        offset: int,
        body: AsyncIterable[bytes],
        content_length: int | None = None,
        checksum: BodyChecksum | None = None,
    ) -> Appended:
        """Append ``body`` at ``offset`` (which must be the upload's offset); complete on the last byte."""
        async with self.locks.hold(upload_id):
            progress = await self.progress(caller, upload_id)
            if offset != progress.offset:
                raise Conflict("Upload-Offset does not match the upload's offset", offset=progress.offset)
            remaining = (progress.length or 0) - offset
            if content_length is not None and content_length > remaining:
                raise TooLarge("the body runs past Upload-Length", max_size=progress.length)
            if progress.session.state is UploadState.OPEN:
                if checksum is None:
                    await self._write(caller, progress, body, remaining)
                else:
                    async with self.spool.verified(body, checksum, remaining) as verified:
                        await self._write(caller, progress, verified, remaining)
                progress = await self.progress(caller, upload_id)
            artifact = await self.finish(caller, progress) if progress.received_all else None
            return Appended(progress, artifact)

    async def finish(self, caller: Caller, progress: TusProgress) -> Artifact:
        """Complete an upload whose bytes all arrived (verifying size and the declared sha256)."""
        artifact = await self.uploads.complete(caller, progress.session.id)
        await self.repo.delete_tail(progress.session.id)
        return artifact

    async def terminate(self, caller: Caller, upload_id: str) -> None:
        async with self.locks.hold(upload_id):
            session = await self.uploads.get(caller, upload_id)
            if session.protocol != TUS_PROTOCOL:
                raise NotFound()
            await self.uploads.abort(caller, upload_id)
            await self.repo.delete_tail(session.id)

    # -- writing --------------------------------------------------------------------------------------------

    async def _write(
        self, caller: Caller, progress: TusProgress, body: AsyncIterable[bytes], remaining: int
    ) -> None:
        chunk_size = progress.session.chunk_size
        start = progress.full_chunks * chunk_size
        buffer = bytearray(progress.tail)
        pending: bytes | memoryview = b""
        received = 0
        try:
            async for piece in body:
                if received + len(piece) > remaining:
                    pending = piece[: remaining - received]
                    raise TooLarge("the body runs past Upload-Length", max_size=progress.length)
                received += len(piece)
                view = memoryview(piece)
                while view:
                    take = chunk_size - len(buffer)
                    buffer += view[:take]
                    view = view[take:]
                    pending = view
                    if len(buffer) == chunk_size:
                        # Shielded: a preempting request may only cancel the wait for body bytes.
                        with anyio.CancelScope(shield=True):
                            await self._stage(caller, progress.session, start, bytes(buffer))
                        start += chunk_size
                        buffer.clear()
                pending = b""
        except BaseException:
            with anyio.CancelScope(shield=True):
                try:
                    await self._settle(caller, progress, start, bytes(buffer) + bytes(pending))
                except BlobstoreError as exc:
                    # The request's own error is the one to report; this one is only logged.
                    logger.warning("could not keep the received part of an interrupted PATCH: %r", exc)
            raise
        if not await self._settle(caller, progress, start, bytes(buffer)):
            raise Conflict("another request changed this upload at the same time")

    async def _settle(self, caller: Caller, progress: TusProgress, start: int, data: bytes) -> bool:
        """Stage the full chunks in ``data`` (bytes from ``start``), and the last chunk once the length is
        reached; keep the rest as the tail. False when another request won the tail.
        """
        session = progress.session
        chunk_size = session.chunk_size
        while len(data) >= chunk_size:
            await self._stage(caller, session, start, data[:chunk_size])
            start += chunk_size
            data = data[chunk_size:]
        if start + len(data) == session.declared_size:
            if data:
                await self._stage(caller, session, start, data)
            await self.repo.delete_tail(session.id)
            return True
        if start == progress.full_chunks * chunk_size and data == progress.tail:
            return True  # nothing new
        return await self.repo.put_tail(
            session.id,
            expected_end=progress.tail_end,
            offset=start,
            data=data,
            chunk_size=chunk_size,
            now=self.clock(),
        )

    async def _stage(self, caller: Caller, session: UploadSession, start: int, data: bytes) -> None:
        await self.uploads.put_chunk(caller, session.id, start // session.chunk_size, _once(data))


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data

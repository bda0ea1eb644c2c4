"""The write sequence every backend shares: put, stage a chunk, commit the staged chunks.

Each write streams into a *sink* that the backend opens (a temp file, a buffer, a multipart upload, a spool),
is hashed on its way in, has its size and digest claims checked, and only then is published (under a
generation key) or kept (as a staged chunk). Whatever happens, the sink is discarded at the end: after a
publish that frees what the write needed (a temp file, a commit's marker), after a failure it takes back
everything the write left; the error itself always reaches the caller. An ``OSError`` from anywhere in the
sequence (a write, an ``fsync``, a directory ``fsync``, a link, a rename, in the request's task or in the one
that writes while the next batch arrives) reaches it as the catalogue's ``StorageFull`` (``ENOSPC``,
``EDQUOT``) or ``StorageUnavailable``, translated here once for every backend whatever the sink did not.

Backends provide only the primitive steps: the sinks (:class:`BlobSink`, :class:`CommitSink`,
:class:`ChunkSink`) and the three methods
of :class:`StagedWrites` that open them.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import AsyncIterable, AsyncIterator, Sequence
from typing import Protocol, cast, runtime_checkable

import anyio

from blobstore.digests import ChunkHasher, HashingWriter, StreamDigest, normalize_sha256, normalize_xxh3
from blobstore.models import BlobInfo, ChunkReceipt
from blobstore.storage.base import Present, ProgressCallback
from blobstore.storage.io_errors import mapped_os_errors
from blobstore.storage.keys import validate_chunk_index, validate_staging_ref
from blobstore.storage.staging import check_commit_chunks
from blobstore.storage.streams import WRITE_BATCH, batched, write_overlapped


class _Sink(Protocol):
    async def discard(self) -> None:
        """Free whatever the write holds; idempotent, and safe after a publish or keep."""
        ...


class _PublishingSink(_Sink, Protocol):
    async def publish(self, digest: StreamDigest) -> str:
        """Make the verified bytes visible under a new generation key, atomically; return the key."""
        ...


class BlobSink(_PublishingSink, Protocol):
    """Where the bytes of one new generation go before it is published."""

    async def write(self, data: bytearray, writer: HashingWriter) -> None:
        """Hash ``data`` into ``writer`` and keep it (the writer refuses it past a size limit)."""
        ...


@runtime_checkable
class OneStepSink(BlobSink, Protocol):
    """A :class:`BlobSink` that can take a whole (short) body in one step."""

    async def write_and_publish(
        self,
        data: bytearray,
        writer: HashingWriter,
        claimed_sha256: str | None,
        present: Present | None = None,
    ) -> BlobInfo:
        """:meth:`write` the stream's last bytes, check the claims (``writer.finish``), :meth:`publish`.

        When ``present`` says the store holds these bytes already, nothing is written or published and the
        result's key is :data:`NOT_KEPT`.
        """
        ...


class CommitSink(_PublishingSink, Protocol):
    """Where the staged chunks of one upload are joined into a new generation before it is published."""

    async def append_staged(self, receipt: ChunkReceipt, writer: HashingWriter) -> None:
        """Read the staged chunk ``receipt`` names, hash it into ``writer`` and keep it.

        A missing chunk is ``UploadIncomplete``; one whose bytes no longer match its receipt ``Corruption``.
        """
        ...


@runtime_checkable
class JoinsAhead(CommitSink, Protocol):
    """A :class:`CommitSink` that may have joined the leading chunks already, while they arrived."""

    async def joined_ahead(self, chunks: Sequence[ChunkReceipt]) -> tuple[int, HashingWriter] | None:
        """How many of the first ``chunks`` are joined (hashed and checked), and the writer that saw them."""
        ...


class ChunkSink(_Sink, Protocol):
    """Where one upload chunk goes before it is kept in its staging area."""

    async def write(self, data: bytearray, hasher: ChunkHasher) -> None: ...

    async def keep(self, receipt: ChunkReceipt) -> ChunkReceipt:
        """Keep the verified chunk; the same bytes kept before give that receipt, others ``ChunkConflict``."""
        ...


class StagedWrites(ABC):
    """``put``, ``stage_put`` and ``stage_commit`` of the :class:`~blobstore.storage.base.BlobStore`."""

    block_size: int

    @abstractmethod
    async def _blob_sink(self, claimed_sha256: str | None) -> BlobSink:
        """A sink for ``put``."""

    @abstractmethod
    async def _commit_sink(
        self, staging_ref: str, chunks: Sequence[ChunkReceipt], size: int, claimed_sha256: str | None
    ) -> CommitSink:
        """A sink joining the staged ``chunks`` (``size`` bytes); ``NotFound`` when the area is gone."""

    @abstractmethod
    async def _chunk_sink(self, staging_ref: str, index: int) -> ChunkSink:
        """A sink for chunk ``index``; ``NotFound`` when the area is gone."""

    async def put(
        self,
        data: AsyncIterable[bytes],
        *,
        expected_size: int | None = None,
        expected_sha256: str | None = None,
        max_size: int | None = None,
        present: Present | None = None,
    ) -> BlobInfo:
        claimed = _claimed_sha256(expected_sha256)
        writer = HashingWriter(block_size=self.block_size, max_size=max_size, expected_size=expected_size)
        with mapped_os_errors():
            sink = await self._blob_sink(claimed)
            try:
                batches = batched(data, writer.check_size, WRITE_BATCH)
                first = await anext(batches, None)
                if first is not None and len(first) < WRITE_BATCH and _one_step(type(sink)):
                    # Only the stream's last batch is short: a small body takes one step (one thread hop).
                    return await cast(OneStepSink, sink).write_and_publish(first, writer, claimed, present)
                if first is not None:
                    await write_overlapped(_chained(first, batches), lambda batch: sink.write(batch, writer))
                return await _publish(sink, writer, claimed)
            finally:
                await _discard(sink)

    async def stage_put(
        self,
        staging_ref: str,
        index: int,
        data: AsyncIterable[bytes],
        *,
        expected_length: int | None = None,
        max_length: int | None = None,
        expected_sha256: str | None = None,
        expected_xxh3: str | None = None,
    ) -> ChunkReceipt:
        validate_staging_ref(staging_ref)
        validate_chunk_index(index)
        claimed_sha = _claimed_sha256(expected_sha256)
        claimed_xxh3 = normalize_xxh3(expected_xxh3) if expected_xxh3 is not None else None
        hasher = ChunkHasher(expected_length=expected_length, max_length=max_length)
        with mapped_os_errors():
            sink = await self._chunk_sink(staging_ref, index)
            try:
                batches = batched(data, hasher.check_size)
                await write_overlapped(batches, lambda batch: sink.write(batch, hasher))
                digest = hasher.finish(expected_sha256=claimed_sha, expected_xxh3=claimed_xxh3)
                return await sink.keep(ChunkReceipt(index, digest.size, digest.sha256, digest.xxh3))
            finally:
                await _discard(sink)

    async def stage_commit(
        self,
        staging_ref: str,
        chunks: Sequence[ChunkReceipt],
        *,
        expected_size: int | None = None,
        expected_sha256: str | None = None,
        progress: ProgressCallback | None = None,
    ) -> BlobInfo:
        validate_staging_ref(staging_ref)
        claimed = _claimed_sha256(expected_sha256)
        size = check_commit_chunks(chunks, expected_size)
        writer = HashingWriter(block_size=self.block_size, expected_size=expected_size)
        with mapped_os_errors():
            sink = await self._commit_sink(staging_ref, chunks, size, claimed)
            try:
                first = 0
                if isinstance(sink, JoinsAhead) and (joined := await sink.joined_ahead(chunks)) is not None:
                    first, ahead = joined
                    writer.continue_from(ahead)
                    if progress is not None:
                        await progress(writer.size)
                for receipt in chunks[first:]:
                    await sink.append_staged(receipt, writer)
                    if progress is not None:
                        await progress(writer.size)
                return await _publish(sink, writer, claimed)
            finally:
                await _discard(sink)


async def _chained(first: bytearray, rest: AsyncIterator[bytearray]) -> AsyncIterator[bytearray]:
    yield first
    async for batch in rest:
        yield batch


@functools.cache
def _one_step(sink_type: type) -> bool:
    # isinstance against a runtime-checkable protocol inspects the class on every call (a few % of a 1 KiB
    # upload's CPU); the answer depends on the class only.
    return issubclass(sink_type, OneStepSink)


def _claimed_sha256(value: str | None) -> str | None:
    return normalize_sha256(value) if value is not None else None


async def _publish(sink: _PublishingSink, writer: HashingWriter, claimed: str | None) -> BlobInfo:
    # The claims are checked before anything becomes visible.
    digest = writer.finish(expected_sha256=claimed)
    return blob_info(await sink.publish(digest), digest)


def blob_info(key: str, digest: StreamDigest) -> BlobInfo:
    """The published generation ``key`` of the bytes ``digest`` describes."""
    return BlobInfo(key, digest.size, digest.sha256, digest.block_size, digest.block_xxh3)


async def _discard(sink: _Sink) -> None:
    # Shielded: a cancelled write must still take back what it left.
    with anyio.CancelScope(shield=True):
        await sink.discard()

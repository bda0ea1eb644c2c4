"""ArtifactService: the one API the HTTP and MCP edges call.

It owns the rules that cross storage and metadata: verify while writing, publish the blob, then commit the row
(dedup onto an existing live blob only after every byte was received and hashed; a short body whose content
is live already is not written at all), and scope every read by namespace. Chunked uploads live in
:mod:`blobstore.upload_sessions`; this class builds their manager with the collaborators it shares
(repository, blob store, audit log, clock) and itself as the publisher of a joined upload, and lends it to the
edges as :attr:`ArtifactService.uploads`.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import anyio
import anyio.to_thread

from blobstore import metrics
from blobstore.audit import AuditLog
from blobstore.clock import Clock, utcnow
from blobstore.config import Settings
from blobstore.digests import StreamDigest
from blobstore.errors import (
    BlobstoreError,
    ContentNotLive,
    InvalidRequest,
    NotFound,
    QuotaExceeded,
    RangeRequired,
    TooLarge,
)
from blobstore.events import ArtifactChange, ArtifactEvent, ArtifactEvents
from blobstore.ids import check_id, new_artifact_id
from blobstore.media import PROBE_BYTES, probe, resolve_mime
from blobstore.metadata.repository import MetadataRepository
from blobstore.models import (
    UNSET,
    Artifact,
    BlobInfo,
    BlobRecord,
    Caller,
    CompletionClaim,
    NewArtifact,
    Page,
)
from blobstore.nowait import WouldBlock
from blobstore.ranges import Window, window
from blobstore.storage.base import (
    NOT_KEPT,
    BlobStore,
    Present,
    SupportsBlockingRead,
    SupportsCachedRead,
    SupportsLocalPath,
    SupportsPresign,
)
from blobstore.upload_sessions import UploadManager
from blobstore.validation import validate_metadata, validate_mime, validate_name

__all__ = [
    "CURSOR_PATTERN",
    "ArtifactService",
    "Clock",
    "RangeChoice",
    "RangeRead",
    "decode_cursor",
    "encode_cursor",
    "utcnow",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
CURSOR_PATTERN = re.compile(r"[0-9]{1,16}\.[A-Za-z0-9_-]{1,64}")
"""A keyset cursor: the page's last creation time (microseconds since 1970) and artifact id. Every string of
this form is a valid position (the OpenAPI document says so); any other is ``invalid_request``."""


def encode_cursor(artifact: Artifact) -> str:
    return f"{(artifact.created_at - _EPOCH) // _MICROSECOND}.{artifact.id}"


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    if CURSOR_PATTERN.fullmatch(cursor) is None:
        raise InvalidRequest("invalid cursor")
    micros, artifact_id = cursor.split(".", 1)
    return _EPOCH + int(micros) * _MICROSECOND, artifact_id


P = TypeVar("P")

_READ_THREADS = 8
"""Worker threads for one-call range reads at a time (as many as the SQLite reads had on their own)."""

RangeChoice = Callable[[Artifact], tuple[P, tuple[int, int] | None]]
"""Given the artifact, what to answer (``P``, the caller's plan) and the byte span ``[start, end)`` to read
for it now, or None to read nothing. It runs wherever the lookup ran (a worker thread): pure, no I/O. What
it raises (a 416, a bad window) propagates as raised."""


@dataclass(frozen=True, slots=True)
class RangeRead(Generic[P]):
    """What :meth:`ArtifactService.read_range` found and read."""

    artifact: Artifact
    blob: BlobInfo
    plan: P
    data: bytes | None
    """The span the choice asked for, every byte checked against its block's XXH3; None when it asked none."""


class ArtifactService:
    def __init__(
        self,
        *,
        settings: Settings,
        blobs: BlobStore,
        repo: MetadataRepository,
        audit: AuditLog | None = None,
        clock: Clock = utcnow,
        sole_server: bool = False,
    ) -> None:
        self.settings = settings
        self.blobs = blobs
        self.repo = repo
        self.audit = audit or AuditLog()
        self.clock = clock
        self.events = ArtifactEvents()
        # Each one-call range read holds a thread and up to a window's worth of blocks: bound both.
        self._read_limiter = anyio.CapacityLimiter(_READ_THREADS)
        self._blocking_checked: object = None
        self._blocking: SupportsBlockingRead | None = None
        self._cached: SupportsCachedRead | None = None
        self.uploads = UploadManager(
            settings=settings,
            repo=repo,
            blobs=blobs,
            audit=self.audit,
            clock=self.now,
            publisher=self,
            sole_server=sole_server,
        )

    def now(self) -> datetime:
        """The store's time. Collaborators get this method as their clock, so that swapping :attr:`clock`
        (an admin's or a test's time travel) moves every rule with a deadline at once."""
        return self.clock()

    # -- time-to-live ---------------------------------------------------------------------------------------

    def expiry_for(self, ttl_seconds: int | None, now: datetime) -> datetime:
        ttl = self.settings.default_ttl_seconds if ttl_seconds is None else ttl_seconds
        if ttl <= 0 or ttl > self.settings.max_ttl_seconds:
            raise InvalidRequest(f"ttl_seconds must be between 1 and {self.settings.max_ttl_seconds}")
        return now + timedelta(seconds=ttl)

    async def check_quota(self, namespace: str, adding: int) -> None:
        quota = self.settings.namespace_quota_bytes
        if quota is None:
            return
        used = await self.repo.namespace_usage(namespace, now=self.clock())
        if used + adding > quota:
            raise QuotaExceeded(quota=quota, used=used)

    async def size_limit(self, namespace: str) -> tuple[int, bool]:
        """The most bytes one upload may bring now, and whether the namespace quota (not the size) sets it."""
        quota = self.settings.namespace_quota_bytes
        if quota is None:
            return self.settings.max_artifact_size, False
        room = max(0, quota - await self.repo.namespace_usage(namespace, now=self.clock()))
        if room < self.settings.max_artifact_size:
            return room, True
        return self.settings.max_artifact_size, False

    # -- creating artifacts ---------------------------------------------------------------------------------

    async def create_artifact(
        self,
        caller: Caller,
        data: AsyncIterable[bytes],
        *,
        name: str,
        mime_type: str | None = None,
        ttl_seconds: int | None = None,
        metadata: dict[str, Any] | None = None,
        expected_size: int | None = None,
        expected_sha256: str | None = None,
        pinned: bool = False,
    ) -> Artifact:
        """Store a stream as a new artifact (single-request upload)."""
        started = time.monotonic()
        name = validate_name(name)
        declared_mime = validate_mime(mime_type)
        user_metadata = validate_metadata(metadata)
        now = self.clock()
        expires_at = None if pinned else self.expiry_for(ttl_seconds, now)
        if expected_size is not None:
            if expected_size > self.settings.max_artifact_size:
                raise TooLarge(max_size=self.settings.max_artifact_size)
            await self.check_quota(caller.namespace, expected_size)
        max_size, quota_bound = await self.size_limit(caller.namespace)
        head = bytearray()
        try:
            try:
                blob = await self.blobs.put(
                    _keeping_head(data, head),
                    expected_size=expected_size,
                    expected_sha256=expected_sha256,
                    max_size=max_size,
                    present=self._present_content(),
                )
            except TooLarge:
                # Stop an undeclared stream at the quota rather than after receiving it whole.
                if quota_bound:
                    raise QuotaExceeded(quota=self.settings.namespace_quota_bytes) from None
                raise
            artifact = await self.publish(
                caller,
                blob,
                name=name,
                declared_mime=declared_mime,
                expires_at=expires_at,
                metadata=user_metadata,
                pinned=pinned,
                head=bytes(head),
            )
        except BlobstoreError as exc:
            self.audit.outcome(caller, "upload", exc.code, started, size=expected_size)
            raise
        self.audit.outcome(caller, "upload", "ok", started, artifact=artifact)
        return artifact

    async def stage(self, caller: Caller, data: AsyncIterable[bytes]) -> BlobInfo:
        """Stream bytes into a new blob that no artifact points at yet, within the caller's size limit:
        :meth:`publish` it, or :meth:`discard_staged` it. Until then it is invisible (the orphan sweep
        removes it should the process end first)."""
        max_size, quota_bound = await self.size_limit(caller.namespace)
        try:
            return await self.blobs.put(data, max_size=max_size)
        except TooLarge:
            if quota_bound:
                raise QuotaExceeded(quota=self.settings.namespace_quota_bytes) from None
            raise

    async def discard_staged(self, blob: BlobInfo) -> None:
        await self.blobs.delete(blob.key)

    async def live_twin(
        self,
        caller: Caller,
        *,
        sha256: str,
        size: int,
        name: str,
        metadata: dict[str, Any],
        expires_at: datetime,
    ) -> Artifact | None:
        """The caller's live artifact with these bytes, name and metadata, its expiry moved to ``expires_at``
        when that is later (pinned artifacts stay pinned); None when there is none."""
        now = self.clock()
        for found in await self.repo.find_artifacts_with_content(caller.namespace, sha256, now=now):
            if found.name != name or found.metadata != metadata or found.size != size:
                continue
            if found.pinned or found.expires_at is None or found.expires_at >= expires_at:
                return found
            extended = await self.repo.update_artifact(
                caller.namespace, found.id, expires_at=expires_at, now=now
            )
            if extended is not None:
                return extended
        return None

    async def publish(
        self,
        caller: Caller,
        blob: BlobInfo,
        *,
        name: str,
        declared_mime: str | None,
        expires_at: datetime | None,
        metadata: dict[str, Any],
        pinned: bool = False,
        completion: CompletionClaim | None = None,
        head: bytes | None = None,
    ) -> Artifact:
        """Commit the row for a verified, published generation; drop the generation if deduplicated.

        ``head`` is the blob's first bytes (up to ``PROBE_BYTES``) when the caller kept them on the way in;
        otherwise they are read back from the blob store for the MIME sniffing.

        The namespace quota is checked again inside the commit's transaction, atomically with it; with
        ``completion``, the same transaction completes that upload (``MetadataRepository.commit_artifact``).

        A blob the store did not keep (its key ``NOT_KEPT``: a live blob held the content when it arrived) is
        committed onto that live blob; should it have been collected since, the bytes (then all in ``head``)
        are kept after all and committed as new content.
        """
        kept = blob.key != NOT_KEPT
        try:
            await self.check_quota(caller.namespace, blob.size)
            if head is None:
                head = await self._head(blob)
            mime = resolve_mime(declared_mime, name, head)
            new = NewArtifact(
                id=new_artifact_id(),
                namespace=caller.namespace,
                name=name,
                mime_type=mime,
                created_at=self.clock(),
                expires_at=expires_at,
                pinned=pinned,
                metadata=metadata,
                media=probe(mime, head),
            )
            commit = functools.partial(
                self.repo.commit_artifact,
                artifact=new,
                quota=self.settings.namespace_quota_bytes,
                completion=completion,
            )
            try:
                result = await commit(blob=blob, now=self.clock(), dedup_only=not kept)
            except ContentNotLive:
                blob = await self._keep(blob, head)
                kept = True
                result = await commit(blob=blob, now=self.clock())
        except BaseException:
            # Nothing references this generation: remove it now rather than leave it to the orphan sweep.
            if kept:
                await self.blobs.delete(blob.key)
            raise
        metrics.COMPLETIONS.labels("true" if result.deduplicated else "false").inc()
        if result.deduplicated and kept:
            await self.blobs.delete(blob.key)
        await self.events.emit(ArtifactEvent(ArtifactChange.CREATED, result.artifact.id, caller.namespace))
        return result.artifact

    def _present_content(self) -> Present | None:
        """For ``put``: whether a live blob holds a short body's content already (looked up on the worker
        thread that hashed it). Only bodies that :func:`_keeping_head` keeps whole qualify, so that the bytes
        are still at hand should that blob be collected before the commit; only where the lookup is a plain
        blocking read (a SQLite file)."""
        if not self.repo.blocking_reads:
            return None
        repo = self.repo

        def present(digest: StreamDigest) -> bool:
            return digest.size <= PROBE_BYTES and repo.live_content_blocking(digest.sha256, digest.size)

        return present

    async def _keep(self, blob: BlobInfo, content: bytes | None) -> BlobInfo:
        """Store the bytes of a blob that ``put`` did not keep, checked against its digest."""
        if content is None or len(content) != blob.size:
            raise AssertionError("a blob that was not kept must come with its whole content")
        return await self.blobs.put(_once(content), expected_size=blob.size, expected_sha256=blob.sha256)

    async def _head(self, blob: BlobInfo) -> bytes:
        parts: list[bytes] = []
        async for piece in self.blobs.read(blob, 0, min(blob.size, PROBE_BYTES)):
            parts.append(piece)
        return b"".join(parts)

    # -- reading --------------------------------------------------------------------------------------------

    async def get_artifact(self, caller: Caller, artifact_id: str) -> Artifact:
        found = await self.repo.get_artifact(caller.namespace, check_id(artifact_id), now=self.clock())
        if found is None:
            raise NotFound()
        return found

    async def open_artifact(self, caller: Caller, artifact_id: str) -> tuple[Artifact, BlobInfo]:
        """The artifact and the blob to stream it from; NotFound for missing, expired and foreign ids."""
        found = await self.repo.get_artifact_with_blob(
            caller.namespace, check_id(artifact_id), now=self.clock()
        )
        if found is None:
            raise NotFound()
        artifact, record = found
        return artifact, record.info

    async def read_range(self, caller: Caller, artifact_id: str, choose: RangeChoice[P]) -> RangeRead[P]:
        """Look the artifact up, let ``choose`` decide from it what to read, and read that span (verified).

        Over a SQLite file and a blob store with blocking reads (local disk, memory), the whole of it is one
        call: on the event loop when nothing it needs would wait (the span's bytes in the page cache, no lock
        on the database: ``blobstore.nowait``), else on a worker thread. The handoff to a thread and back,
        not the read, is most of what a small read costs. Elsewhere (PostgreSQL, S3) the same steps run one
        after the other. The span is read into memory whole: ``choose`` keeps it small (a window's worth) and
        leaves longer ones to :meth:`stream`; it may be called twice (a read on the event loop that would
        wait is done again on the thread). NotFound for missing, expired and foreign ids.
        """
        artifact_id = check_id(artifact_id)
        now = self.clock()
        blobs = self._blocking_blobs()
        if blobs is not None and self.repo.blocking_reads:
            namespace = caller.namespace
            if self._cached is not None:
                try:
                    return _read_range_at_once(
                        self.repo.get_artifact_with_blob_nowait,
                        self._cached.read_cached,
                        namespace,
                        artifact_id,
                        now,
                        choose,
                    )
                except WouldBlock:
                    pass
            return await anyio.to_thread.run_sync(
                _read_range_at_once,
                self.repo.get_artifact_with_blob_blocking,
                blobs.read_blocking,
                namespace,
                artifact_id,
                now,
                choose,
                limiter=self._read_limiter,
            )
        found = await self.repo.get_artifact_with_blob(caller.namespace, artifact_id, now=now)
        if found is None:
            raise NotFound()
        artifact, record = found
        plan, span = choose(artifact)
        data = None
        if span is not None:
            start, end = span
            data = b"".join([piece async for piece in self.stream(record.info, start, end)])
        return RangeRead(artifact, record.info, plan, data)

    def _blocking_blobs(self) -> SupportsBlockingRead | None:
        # isinstance against a runtime-checkable protocol inspects the class each time: about 1 % of a small
        # range read. Decided once per store object, with whether its reads may try the event loop first.
        blobs = self.blobs
        if self._blocking_checked is not blobs:
            self._blocking = blobs if isinstance(blobs, SupportsBlockingRead) else None
            cached = blobs if isinstance(blobs, SupportsCachedRead) else None
            self._cached = cached if self.settings.inline_reads else None
            self._blocking_checked = blobs
        return self._blocking

    def stream(self, blob: BlobInfo, start: int = 0, end: int | None = None) -> AsyncIterator[bytes]:
        """Bytes ``[start, end)`` of a blob, each block verified before it is yielded."""
        stop = blob.size if end is None else end
        return self.blobs.read(blob, start, stop - start)

    def local_path(self, blob: BlobInfo) -> Path | None:
        if isinstance(self.blobs, SupportsLocalPath):
            return self.blobs.local_path(blob)
        return None

    async def presigned_download(self, artifact: Artifact, blob: BlobInfo) -> str | None:
        """A presigned storage URL of the artifact's bytes when the operator enabled them (S3), else None.

        The URL is a bearer capability until it expires (``BLOBSTORE_S3_PRESIGN_SECONDS``).
        """
        if not self.settings.s3_presign_downloads or not isinstance(self.blobs, SupportsPresign):
            return None
        return await self.blobs.presigned_url(
            blob,
            expires_in=self.settings.s3_presign_seconds,
            filename=artifact.name,
            content_type=artifact.mime_type,
        )

    async def read_window(
        self, caller: Caller, artifact_id: str, offset: int | None, length: int | None
    ) -> tuple[Artifact, Window, bytes]:
        """One bounded window (MCP semantics): ``[offset, min(offset+length, size))``, at most the maximum."""
        started = time.monotonic()
        limit = self.settings.mcp_window_max

        def choose(artifact: Artifact) -> tuple[Window, tuple[int, int] | None]:
            win = window(offset, length, artifact.size, limit)
            return win, (win.offset, win.end) if win.length else None

        found = await self.read_range(caller, artifact_id, choose)
        win = found.plan
        self.audit.outcome(caller, "read", "ok", started, artifact=found.artifact, size=win.length)
        return found.artifact, win, found.data or b""

    async def read_all(self, caller: Caller, artifact_id: str, *, limit: int) -> tuple[Artifact, bytes]:
        """The whole artifact when it is at most ``limit`` bytes (callers check the size first)."""
        artifact, blob = await self.open_artifact(caller, artifact_id)
        if artifact.size > limit:
            raise RangeRequired(size=artifact.size)
        parts = [piece async for piece in self.stream(blob)]
        return artifact, b"".join(parts)

    async def list_artifacts(
        self, caller: Caller, *, limit: int = 100, cursor: str | None = None
    ) -> Page[Artifact]:
        if not 1 <= limit <= 1000:
            raise InvalidRequest("limit must be between 1 and 1000")
        after = decode_cursor(cursor) if cursor is not None else None
        items = await self.repo.list_artifacts(
            caller.namespace, now=self.clock(), limit=limit + 1, after=after
        )
        more = len(items) > limit
        items = items[:limit]
        return Page(items=items, next_cursor=encode_cursor(items[-1]) if more and items else None)

    # -- changing -------------------------------------------------------------------------------------------

    async def delete_artifact(self, caller: Caller, artifact_id: str) -> Artifact:
        started = time.monotonic()
        artifact_id = check_id(artifact_id)
        # Deleting is how space is freed, so it must get through on a full disk (the reserve makes room).
        deleted = await self.repo.freeing(lambda: self.repo.delete_artifact(caller.namespace, artifact_id))
        if deleted is None:
            raise NotFound()
        self.audit.outcome(caller, "delete", "ok", started, artifact=deleted)
        await self.events.emit(ArtifactEvent(ArtifactChange.DELETED, deleted.id, deleted.namespace))
        return deleted

    async def update_artifact(
        self, caller: Caller, artifact_id: str, *, ttl_seconds: int | None = UNSET, pinned: bool = UNSET
    ) -> Artifact:
        now = self.clock()
        changes: dict[str, Any] = {}
        if ttl_seconds is not UNSET:
            changes["expires_at"] = None if ttl_seconds is None else self.expiry_for(ttl_seconds, now)
        if pinned is not UNSET:
            changes["pinned"] = bool(pinned)
        updated = await self.repo.update_artifact(caller.namespace, check_id(artifact_id), now=now, **changes)
        if updated is None:
            raise NotFound()
        return updated


class _Lookup(Protocol):
    def __call__(
        self, namespace: str, artifact_id: str, *, now: datetime
    ) -> tuple[Artifact, BlobRecord] | None: ...


def _read_range_at_once(
    lookup: _Lookup,
    read: Callable[[BlobInfo, int, int], bytes],
    namespace: str,
    artifact_id: str,
    now: datetime,
    choose: RangeChoice[P],
) -> RangeRead[P]:
    """The lookup, the choice and the read of a range in one synchronous call (see ``read_range``)."""
    found = lookup(namespace, artifact_id, now=now)
    if found is None:
        raise NotFound()
    artifact, record = found
    plan, span = choose(artifact)
    data = None
    if span is not None:
        start, end = span
        data = read(record.info, start, end - start)
    return RangeRead(artifact, record.info, plan, data)


async def _once(content: bytes) -> AsyncIterator[bytes]:
    yield content


async def _keeping_head(data: AsyncIterable[bytes], head: bytearray) -> AsyncIterator[bytes]:
    """``data`` unchanged, its first ``PROBE_BYTES`` copied into ``head`` as they pass (for sniffing)."""
    async for piece in data:
        if len(head) < PROBE_BYTES:
            head += piece[: PROBE_BYTES - len(head)]
        yield piece

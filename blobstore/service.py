"""ArtifactService: the one API the HTTP and MCP edges call.

It scopes every read by namespace and answers them (lookups, listings, range reads, streams, presigned
downloads), and changes or deletes what a caller owns. Writing is delegated: the rules that turn verified
bytes into an artifact (TTL, quota, dedup, the commit) live in :class:`~blobstore.publishing.Publisher`, and
chunked uploads in :mod:`blobstore.upload_sessions`. The composition root (:mod:`blobstore.runtime`) builds
both over the same repository, blob store, audit log and clock and hands them to the service, which lends the
upload manager to the edges as :attr:`ArtifactService.uploads`.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import anyio
import anyio.to_thread

from blobstore.artifact_facts import ArtifactFacts
from blobstore.audit import AuditLog
from blobstore.clock import Clock, utcnow
from blobstore.config import Settings
from blobstore.errors import InvalidRequest, NotFound, RangeRequired
from blobstore.events import ArtifactChange, ArtifactEvent, ArtifactEvents
from blobstore.ids import check_id
from blobstore.metadata.repository import MetadataRepository
from blobstore.models import UNSET, Artifact, BlobInfo, BlobRecord, Caller, Page
from blobstore.nowait import WouldBlock
from blobstore.publishing import Publisher
from blobstore.ranges import Window, window
from blobstore.share_links import ShareLinks
from blobstore.storage.base import (
    BlobStore,
    SupportsBlockingRead,
    SupportsCachedRead,
    SupportsLocalPath,
    SupportsPresign,
)
from blobstore.store_clock import StoreClock
from blobstore.upload_sessions import UploadManager

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
        publisher: Publisher,
        uploads: UploadManager,
        audit: AuditLog,
        events: ArtifactEvents,
        clock: StoreClock,
        share_links: ShareLinks,
    ) -> None:
        self.settings = settings
        self.blobs = blobs
        self.repo = repo
        self.publisher = publisher
        # The single-request upload and the staging of a blob to publish later (the proxy's streamed payloads)
        # are the publisher's, lent as they are: one signature each, in publishing.py.
        self.create_artifact = publisher.create_artifact
        self.stage = publisher.stage
        self.discard_staged = publisher.discard_staged
        self.publish = publisher.publish
        self.uploads = uploads
        self.audit = audit
        self.events = events
        self._clock = clock
        # Minted by the console and the MCP edge (files/authorizeDownload, the proxy's URL arguments), checked
        # by the share route; its key signs upload targets too.
        self.share_links = share_links
        # Each one-call range read holds a thread and up to a window's worth of blocks: bound both.
        self._read_limiter = anyio.CapacityLimiter(_READ_THREADS)
        self._blocking_checked: object = None
        self._blocking: SupportsBlockingRead | None = None
        self._cached: SupportsCachedRead | None = None
        # The artifacts content reads just looked up (``blobstore.artifact_facts`` says what that trusts).
        self.facts = ArtifactFacts(settings.facts_cache_seconds)

    @property
    def clock(self) -> StoreClock:
        """The store's clock, shared with every collaborator: setting its ``source`` moves every rule with a
        deadline at once. Read-only, so that replacing it (it would move the service alone) fails loudly."""
        return self._clock

    # -- creating artifacts (create_artifact is the publisher's) --------------------------------------------

    def expiry_for(self, ttl_seconds: int | None, now: datetime) -> datetime:
        return self.publisher.expiry_for(ttl_seconds, now)

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
            self.facts.forget(caller.namespace, found.id)
            if extended is not None:
                return extended
        return None

    # -- reading --------------------------------------------------------------------------------------------

    async def get_artifact(self, caller: Caller, artifact_id: str) -> Artifact:
        found = await self.repo.get_artifact(caller.namespace, check_id(artifact_id), now=self._clock())
        if found is None:
            raise NotFound()
        return found

    async def open_artifact(self, caller: Caller, artifact_id: str) -> tuple[Artifact, BlobInfo]:
        """The artifact and the blob to stream it from; NotFound for missing, expired and foreign ids."""
        found = await self.repo.get_artifact_with_blob(
            caller.namespace, check_id(artifact_id), now=self._clock()
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
        now = self._clock()
        namespace = caller.namespace
        facts = self.facts
        remembered = facts.get(namespace, artifact_id, now) if facts.enabled else None
        if remembered is not None:
            try:
                return await self._read_chosen(remembered, choose)
            except NotFound:
                # The blob went away under a remembered artifact (deleted elsewhere): ask the database.
                facts.forget(namespace, artifact_id)
        blobs = self._blocking_blobs()
        if blobs is not None and self.repo.blocking_reads:
            found: RangeRead[P] | None = None
            if self._cached is not None:
                with contextlib.suppress(WouldBlock):
                    found = _read_range_at_once(
                        self.repo.get_artifact_with_blob_nowait,
                        self._cached.read_cached,
                        namespace,
                        artifact_id,
                        now,
                        choose,
                    )
            if found is None:
                found = await anyio.to_thread.run_sync(
                    _read_range_at_once,
                    self.repo.get_artifact_with_blob_blocking,
                    blobs.read_blocking,
                    namespace,
                    artifact_id,
                    now,
                    choose,
                    limiter=self._read_limiter,
                )
            facts.put(found.artifact, found.blob)
            return found
        looked_up = await self.repo.get_artifact_with_blob(namespace, artifact_id, now=now)
        if looked_up is None:
            raise NotFound()
        artifact, record = looked_up
        facts.put(artifact, record.info)
        return await self._read_chosen((artifact, record.info), choose)

    async def _read_chosen(self, found: tuple[Artifact, BlobInfo], choose: RangeChoice[P]) -> RangeRead[P]:
        """``choose``'s span of an artifact already looked up, read and verified (see :meth:`read_range`)."""
        artifact, blob = found
        plan, span = choose(artifact)
        if span is None:
            return RangeRead(artifact, blob, plan, None)
        start, end = span
        blobs = self._blocking_blobs()
        if blobs is None:
            data = b"".join([piece async for piece in self.stream(blob, start, end)])
        elif self._cached is not None:
            try:
                data = self._cached.read_cached(blob, start, end - start)
            except WouldBlock:
                data = await anyio.to_thread.run_sync(
                    blobs.read_blocking, blob, start, end - start, limiter=self._read_limiter
                )
        else:
            data = await anyio.to_thread.run_sync(
                blobs.read_blocking, blob, start, end - start, limiter=self._read_limiter
            )
        return RangeRead(artifact, blob, plan, data)

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
        self,
        caller: Caller,
        artifact_id: str,
        offset: int | None,
        length: int | None,
        *,
        max_window: int | None = None,
    ) -> tuple[Artifact, Window, bytes]:
        """One bounded window (MCP semantics): ``[offset, min(offset+length, size))``, at most the maximum
        (``mcp_window_max``, or ``max_window`` when that is lower)."""
        started = time.monotonic()
        limit = self.settings.mcp_window_max
        if max_window is not None:
            limit = min(limit, max_window)

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
            caller.namespace, now=self._clock(), limit=limit + 1, after=after
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
        self.facts.forget(caller.namespace, artifact_id)
        if deleted is None:
            raise NotFound()
        self.audit.outcome(caller, "delete", "ok", started, artifact=deleted)
        await self.events.emit(ArtifactEvent(ArtifactChange.DELETED, deleted.id, deleted.namespace))
        return deleted

    async def update_artifact(
        self, caller: Caller, artifact_id: str, *, ttl_seconds: int | None = UNSET, pinned: bool = UNSET
    ) -> Artifact:
        now = self._clock()
        changes: dict[str, Any] = {}
        if ttl_seconds is not UNSET:
            changes["expires_at"] = None if ttl_seconds is None else self.expiry_for(ttl_seconds, now)
        if pinned is not UNSET:
            changes["pinned"] = bool(pinned)
        artifact_id = check_id(artifact_id)
        updated = await self.repo.update_artifact(caller.namespace, artifact_id, now=now, **changes)
        self.facts.forget(caller.namespace, artifact_id)
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
    artifact, blob, plan, span = _chosen(lookup(namespace, artifact_id, now=now), choose)
    data = None
    if span is not None:
        start, end = span
        data = read(blob, start, end - start)
    return RangeRead(artifact, blob, plan, data)


def _chosen(
    found: tuple[Artifact, BlobRecord] | None, choose: RangeChoice[P]
) -> tuple[Artifact, BlobInfo, P, tuple[int, int] | None]:
    """The looked-up artifact, its blob, and what ``choose`` plans and would read of it; NotFound when the
    lookup found nothing (missing, expired or foreign)."""
    if found is None:
        raise NotFound()
    artifact, record = found
    plan, span = choose(artifact)
    return artifact, record.info, plan, span

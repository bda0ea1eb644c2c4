"""Publisher: the rules that turn verified bytes into an artifact.

Time-to-live and the namespace quota, the single-request upload (verify while writing, a short body whose
content is live already not written at all), and the commit of a published blob: MIME sniffing and the media
probe, dedup onto an existing live blob only after every byte was received and hashed, the ``created`` event.
A chunked upload's completion (:mod:`blobstore.upload_sessions`) commits its joined blob through the same
:meth:`Publisher.publish`, and a media view its bytes through :meth:`Publisher.publish_rendition`.
"""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from blobstore import metrics
from blobstore.audit import AuditLog
from blobstore.clock import Clock
from blobstore.config import Settings
from blobstore.digests import StreamDigest
from blobstore.errors import BlobstoreError, ContentNotLive, InvalidRequest, QuotaExceeded, TooLarge
from blobstore.events import ArtifactChange, ArtifactEvent, ArtifactEvents
from blobstore.ids import new_artifact_id
from blobstore.media import PROBE_BYTES, probe, resolve_mime
from blobstore.models import Artifact, BlobInfo, Caller, CompletionClaim, NewArtifact, NewRendition, Rendition
from blobstore.records import PublishRecords
from blobstore.storage.base import NOT_KEPT, BlobStore, Present
from blobstore.validation import validate_metadata, validate_mime, validate_name

MediaProber = Callable[[str, BlobInfo, bytes, datetime | None], Awaitable[dict[str, Any]]]
"""Facts only the whole file gives (a PDF's page count, a duration the decoder measured), from the MIME type,
the published blob, its head and the artifact's expiry; never raises. The composition root installs the
media views' prober (:meth:`blobstore.views.engine.MediaViews.probe_blob`)."""


# Its collaborators as fields; compared by identity, and no repr that would print the settings.
@dataclass(kw_only=True, eq=False, repr=False)
class Publisher:
    settings: Settings
    blobs: BlobStore
    repo: PublishRecords
    audit: AuditLog
    events: ArtifactEvents
    clock: Clock
    media_prober: MediaProber | None = None

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
            media = probe(mime, head)
            if self.media_prober is not None:
                media = {**media, **await self.media_prober(mime, blob, head, expires_at)}
            new = NewArtifact(
                id=new_artifact_id(),
                namespace=caller.namespace,
                name=name,
                mime_type=mime,
                created_at=self.clock(),
                expires_at=expires_at,
                pinned=pinned,
                metadata=metadata,
                media=media,
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

    # -- renditions -----------------------------------------------------------------------------------------

    async def publish_rendition(self, data: bytes, sha256: str, rendition: NewRendition) -> Rendition:
        """Store a rendition's bytes as a blob (written, checked against ``sha256`` and published by the blob
        store like an artifact's) and commit its row; what the key holds afterwards.

        Identical bytes dedup onto their live blob; a rendition of the key that another replica committed
        meanwhile is kept instead of this one. Either way this generation is deleted again unless the row now
        uses it; on failure it is deleted too, so nothing is left for the orphan sweep but after a crash.
        """
        blob = await self.blobs.put(_once(data), expected_size=len(data), expected_sha256=sha256)
        try:
            stored = await self.repo.commit_rendition(blob=blob, rendition=rendition, now=self.clock())
        except BaseException:
            await self.blobs.delete(blob.key)
            raise
        if stored.blob.info.key != blob.key:
            await self.blobs.delete(blob.key)
        return stored

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


async def _once(content: bytes) -> AsyncIterator[bytes]:
    yield content


async def _keeping_head(data: AsyncIterable[bytes], head: bytearray) -> AsyncIterator[bytes]:
    """``data`` unchanged, its first ``PROBE_BYTES`` copied into ``head`` as they pass (for sniffing)."""
    async for piece in data:
        if len(head) < PROBE_BYTES:
            head += piece[: PROBE_BYTES - len(head)]
        yield piece

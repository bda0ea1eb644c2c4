"""The chunked-upload state machine: ``open → completing → completed | aborted | expired``.

Chunks (:mod:`blobstore.chunk_plan`) arrive in any order, in parallel, at any replica: the staging area lives
in the blob store and the bookkeeping in the metadata, never in process memory. Completion is a
compare-and-set from ``open`` to ``completing``, so exactly one caller joins the chunks; a second
``complete`` returns the same artifact.

The completer holds a *completion lease* (:mod:`blobstore.completion_leases`) and renews it while it joins.
A completion whose lease ran out belongs to a process that died: the next request that looks at the upload
(complete, status, a chunk, abort, a tus ``HEAD`` or ``PATCH``) or the next cleanup run moves it back to
``open``, and a ``complete`` then joins the chunks again. A server that holds the data-directory lock (SQLite)
knows that a completion started by another lock holder is dead without waiting for its lease. The artifact is
committed in the same transaction that moves the upload to ``completed``, and only while the lease is still
the committer's, so a completer that lost its lease cannot add a second artifact.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

import anyio

from blobstore import direct_uploads
from blobstore.audit import AuditLog
from blobstore.chunk_plan import plan_for
from blobstore.clock import Clock
from blobstore.completion_leases import CompletionLeases
from blobstore.config import Settings
from blobstore.digests import normalize_sha256
from blobstore.errors import (
    BlobstoreError,
    ChunkConflict,
    ChunkIndexOutOfRange,
    CompletionLost,
    Conflict,
    DigestMismatch,
    InvalidRequest,
    LimitExceeded,
    NotFound,
    QuotaExceeded,
    TooLarge,
    TooManyUploads,
    UploadNotOpen,
)
from blobstore.ids import check_id, new_upload_id
from blobstore.models import (
    Artifact,
    BlobInfo,
    Caller,
    ChunkReceipt,
    ChunkRecord,
    CompletionClaim,
    UploadSession,
    UploadState,
    UploadStatus,
)
from blobstore.records import UploadRecords
from blobstore.storage.base import BlobStore, ProgressCallback
from blobstore.validation import validate_metadata, validate_mime, validate_name

logger = logging.getLogger("blobstore.uploads")

COMPLETION_WAIT_SECONDS = 120.0
"""How long a ``complete`` waits for another request's running completion before answering ``conflict``."""
COMPLETION_POLL_SECONDS = 0.1


def check_not_expired(session: UploadSession, now: datetime) -> None:
    """Refuse an ``open`` upload whose lease ran out (cleanup moves it to ``expired`` later): every request
    that writes to an upload, or asks how far it is, sees it expired from that moment on."""
    if session.state is UploadState.OPEN and session.expires_at <= now:
        raise UploadNotOpen("upload has expired", state=UploadState.EXPIRED.value)


class ArtifactPublisher(Protocol):
    """What a completion needs of the artifact rules: TTL, quota and the commit of a joined blob."""

    def expiry_for(self, ttl_seconds: int | None, now: datetime) -> datetime: ...

    async def check_quota(self, namespace: str, adding: int) -> None: ...

    async def size_limit(self, namespace: str) -> tuple[int, bool]: ...

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
    ) -> Artifact: ...


# Its collaborators as fields; compared by identity, and no repr that would print the settings.
@dataclass(kw_only=True, eq=False, repr=False)
class UploadManager:
    settings: Settings
    repo: UploadRecords
    blobs: BlobStore
    audit: AuditLog
    clock: Clock
    publisher: ArtifactPublisher
    leases: CompletionLeases

    # -- begin ---------------------------------------------------------------------------------------------

    def choose_chunk_size(self, requested: int | None, size: int | None) -> int:
        s = self.settings
        if requested is not None:
            if not s.min_chunk_size <= requested <= s.max_chunk_size:
                raise InvalidRequest(f"chunk_size must be between {s.min_chunk_size} and {s.max_chunk_size}")
            if size is not None and -(-size // requested) > s.max_chunks_per_upload:
                raise LimitExceeded(f"size / chunk_size exceeds {s.max_chunks_per_upload} chunks")
            return requested
        chunk = s.default_chunk_size
        # Grow the chunk size (within the maximum) rather than refuse a large declared size.
        while (
            size is not None and -(-size // chunk) > s.max_chunks_per_upload and chunk * 2 <= s.max_chunk_size
        ):
            chunk *= 2
        if size is not None and -(-size // chunk) > s.max_chunks_per_upload:
            raise TooLarge(max_size=s.max_chunk_size * s.max_chunks_per_upload)
        return chunk

    async def begin(
        self,
        caller: Caller,
        *,
        name: str,
        mime_type: str | None = None,
        size: int | None = None,
        sha256: str | None = None,
        chunk_size: int | None = None,
        ttl_seconds: int | None = None,
        metadata: dict[str, Any] | None = None,
        protocol: str = "native",
        direct: bool = False,
    ) -> UploadSession:
        """Begin an upload; ``direct`` asks for presigned part URLs, granted when they are on (S3) and both
        ``size`` and ``sha256`` are declared."""
        name = validate_name(name)
        mime = validate_mime(mime_type)
        user_metadata = validate_metadata(metadata)
        digest = normalize_sha256(sha256) if sha256 is not None else None
        if size is not None:
            if size < 0:
                raise InvalidRequest("size must be >= 0")
            if size > self.settings.max_artifact_size:
                raise TooLarge(max_size=self.settings.max_artifact_size)
            await self.publisher.check_quota(caller.namespace, size)
        chosen = self.choose_chunk_size(chunk_size, size)
        now = self.clock()
        if ttl_seconds is not None:
            self.publisher.expiry_for(ttl_seconds, now)  # validate now, not at completion
        # A cheap early refusal; the count that decides is taken again under a lock when the row is inserted.
        if await self.repo.count_open_uploads(caller.namespace) >= self.settings.max_open_uploads:
            raise TooManyUploads(limit=self.settings.max_open_uploads)
        upload_id = new_upload_id()
        target = direct_uploads.direct_store(self.settings, self.blobs) if direct else None
        part_size = direct_uploads.direct_part_size(chosen, size) if size else None
        if target is not None and part_size is not None and digest is not None:
            chosen = part_size
            protocol = direct_uploads.DIRECT_PROTOCOL
            staging_ref = await target.direct_begin(upload_id, sha256=digest)
        else:
            staging_ref = await self.blobs.stage_begin(upload_id, chunk_size=chosen)
        session = UploadSession(
            id=upload_id,
            namespace=caller.namespace,
            name=name,
            mime_type=mime,
            declared_size=size,
            declared_sha256=digest,
            chunk_size=chosen,
            staging_ref=staging_ref,
            state=UploadState.OPEN,
            ttl_seconds=ttl_seconds,
            metadata=user_metadata,
            protocol=protocol,
            created_at=now,
            updated_at=now,
            expires_at=now + timedelta(seconds=self.settings.upload_ttl_seconds),
            artifact_id=None,
        )
        try:
            await self.repo.create_upload(session, max_open=self.settings.max_open_uploads)
        except BaseException:
            await self.blobs.stage_abort(staging_ref)
            raise
        self.audit.record(
            actor=caller.actor, namespace=caller.namespace, action="upload_begin", result="ok", size=size
        )
        return session

    # -- lookups -------------------------------------------------------------------------------------------

    async def get(self, caller: Caller, upload_id: str) -> UploadSession:
        """The upload, with an abandoned completion first rolled back to ``open``."""
        session = await self.repo.get_upload(caller.namespace, check_id(upload_id))
        if session is None:
            raise NotFound()
        if session.state is UploadState.COMPLETING and await self.leases.recover(session, actor=caller.actor):
            session = await self.repo.get_upload(caller.namespace, session.id)
            if session is None:
                raise NotFound()
        return session

    async def open_session(self, caller: Caller, upload_id: str) -> UploadSession:
        session = await self.get(caller, upload_id)
        check_not_expired(session, self.clock())
        if session.state is not UploadState.OPEN:
            raise UploadNotOpen(f"upload is {session.state.value}", state=session.state.value)
        return session

    async def status(self, caller: Caller, upload_id: str) -> UploadStatus:
        session = await self.get(caller, upload_id)
        chunks = await self.repo.list_chunks(session.id)
        have = {chunk.index for chunk in chunks}
        return UploadStatus(
            session=session,
            chunks=chunks,
            received_bytes=sum(chunk.size for chunk in chunks),
            missing=plan_for(session).missing(have),
        )

    # -- chunks --------------------------------------------------------------------------------------------

    async def put_chunk(
        self,
        caller: Caller,
        upload_id: str,
        index: int,
        data: AsyncIterable[bytes],
        *,
        sha256: str | None = None,
        xxh3: str | None = None,
    ) -> ChunkRecord:
        session = await self.open_session(caller, upload_id)
        if direct_uploads.is_direct(session):
            raise Conflict("the parts of this upload go to their presigned URLs, not to the API")
        if index < 0 or index >= self.settings.max_chunks_per_upload:
            raise ChunkIndexOutOfRange(index=index)
        plan = plan_for(session)
        expected = plan.expected_length(index)
        if session.declared_size is None:
            # No declared size to check up front: refuse a chunk that starts past what may still be stored.
            limit, quota_bound = await self.publisher.size_limit(caller.namespace)
            if index > 0 and index * session.chunk_size >= limit:
                if quota_bound:
                    raise QuotaExceeded(quota=self.settings.namespace_quota_bytes)
                raise TooLarge(max_size=self.settings.max_artifact_size)
        receipt = await self.blobs.stage_put(
            session.staging_ref,
            index,
            data,
            expected_length=expected,
            max_length=session.chunk_size,
            expected_sha256=sha256,
            expected_xxh3=xxh3,
        )
        record = ChunkRecord(
            upload_id=session.id,
            index=index,
            size=receipt.size,
            sha256=receipt.sha256,
            xxh3=receipt.xxh3,
            received_at=self.clock(),
        )
        stored = await self.repo.record_chunk(record)
        if (stored.sha256, stored.size) != (record.sha256, record.size):
            raise ChunkConflict(index=index)
        # A chunk that raced a completion or an abort was not part of it: say so rather than claim success.
        current = await self.repo.get_upload(caller.namespace, session.id)
        if current is None or current.state not in (UploadState.OPEN, UploadState.COMPLETING):
            raise UploadNotOpen(state=current.state.value if current else "gone")
        return stored

    # -- completion ----------------------------------------------------------------------------------------

    async def complete(
        self,
        caller: Caller,
        upload_id: str,
        *,
        sha256: str | None = None,
        progress: ProgressCallback | None = None,
        part_etags: Mapping[int, str] | None = None,
    ) -> Artifact:
        """Complete the upload; ``part_etags`` are a direct upload's part ETags, for storage that cannot list
        them."""
        started = time.monotonic()
        deadline = started + COMPLETION_WAIT_SECONDS
        claimed = normalize_sha256(sha256) if sha256 is not None else None
        while True:
            session = await self.get(caller, upload_id)  # rolls an abandoned completion back first
            if claimed and session.declared_sha256 and claimed != session.declared_sha256:
                raise DigestMismatch("sha256 differs from the one declared when the upload began")
            if session.state is UploadState.COMPLETED:
                return await self._completed_artifact(caller, session)
            if session.state is UploadState.COMPLETING:
                # Another request is joining the chunks: wait for its artifact, or for its lease to run out.
                if time.monotonic() >= deadline:
                    raise Conflict("completion is still in progress; retry later")
                await anyio.sleep(COMPLETION_POLL_SECONDS)
                continue
            check_not_expired(session, self.clock())
            if session.state is not UploadState.OPEN:
                raise UploadNotOpen(f"upload is {session.state.value}", state=session.state.value)
            owner = await self.leases.begin(session.id)
            if owner is None:
                continue  # another request won the compare-and-set: look again
            try:
                artifact = await self._complete_as(
                    owner, caller, session, claimed or session.declared_sha256, progress, part_etags
                )
            except CompletionLost:
                continue  # this request lost its lease to another completer: wait for that one's result
            await self.blobs.stage_abort(session.staging_ref)
            self.audit.outcome(caller, "complete", "ok", started, artifact=artifact)
            return artifact

    async def _complete_as(
        self,
        owner: str,
        caller: Caller,
        session: UploadSession,
        sha256: str | None,
        progress: ProgressCallback | None,
        part_etags: Mapping[int, str] | None = None,
    ) -> Artifact:
        """Join and commit as completion ``owner``, renewing the lease meanwhile; on failure, give the upload
        back to the client (``open``) so that it may resend chunks or abort."""
        try:
            failure: BaseException | None = None
            artifact: Artifact | None = None
            async with anyio.create_task_group() as group:
                group.start_soon(self.leases.keep, session.id, owner)
                try:
                    claim = CompletionClaim(session.id, owner)
                    artifact = await self._join(caller, session, sha256, progress, claim, part_etags)
                except BaseException as exc:  # re-raised below: the task group would wrap it in a group
                    failure = exc
                group.cancel_scope.cancel()
            if failure is not None:
                raise failure
            assert artifact is not None
            return artifact
        except BaseException as exc:
            with anyio.CancelScope(shield=True):
                await self.leases.release(session.id, owner)
            if not isinstance(exc, CompletionLost):
                code = exc.code if isinstance(exc, BlobstoreError) else "internal"
                self.audit.record(
                    actor=caller.actor, namespace=caller.namespace, action="complete", result=code
                )
            raise

    async def _join(
        self,
        caller: Caller,
        session: UploadSession,
        sha256: str | None,
        progress: ProgressCallback | None,
        claim: CompletionClaim,
        part_etags: Mapping[int, str] | None = None,
    ) -> Artifact:
        direct = direct_uploads.is_direct(session)
        if direct:
            await self.publisher.check_quota(caller.namespace, session.declared_size or 0)
            blob = await direct_uploads.commit(self.blobs, session, sha256, progress, part_etags)
        else:
            chunks = await self.repo.list_chunks(session.id)
            total = plan_for(session).check_complete(chunks)
            if total > self.settings.max_artifact_size:
                raise TooLarge(max_size=self.settings.max_artifact_size)
            await self.publisher.check_quota(caller.namespace, total)
            receipts = [
                ChunkReceipt(c.index, c.size, c.sha256, c.xxh3) for c in sorted(chunks, key=lambda c: c.index)
            ]
            blob = await self.blobs.stage_commit(
                session.staging_ref, receipts, expected_size=total, expected_sha256=sha256, progress=progress
            )
        now = self.clock()
        expires_at = self.publisher.expiry_for(session.ttl_seconds, now)
        try:
            return await self.publisher.publish(
                caller,
                blob,
                name=session.name,
                declared_mime=session.mime_type,
                expires_at=expires_at,
                metadata=session.metadata,
                completion=claim,
            )
        except BaseException as exc:
            # The failed commit dropped the object its parts made: a direct upload needs fresh parts.
            if direct and not isinstance(exc, CompletionLost):
                with anyio.CancelScope(shield=True):
                    await direct_uploads.restart(self.blobs, session)
            raise

    async def _completed_artifact(self, caller: Caller, session: UploadSession) -> Artifact:
        if session.artifact_id is None:
            raise Conflict("upload completed without an artifact")
        artifact = await self.repo.get_artifact(caller.namespace, session.artifact_id, now=self.clock())
        if artifact is None:
            raise NotFound()
        return artifact

    # -- abort ---------------------------------------------------------------------------------------------

    async def abort(self, caller: Caller, upload_id: str) -> None:
        session = await self.get(caller, upload_id)
        if session.state is UploadState.ABORTED:
            return
        # Aborting frees staged chunks, so like a delete it gets through on a full disk.
        won = await self.repo.freeing(
            lambda: self.repo.transition_upload(
                session.id, from_states=[UploadState.OPEN], to_state=UploadState.ABORTED, now=self.clock()
            )
        )
        if not won:
            current = await self.get(caller, upload_id)
            if current.state is UploadState.ABORTED:
                return
            raise UploadNotOpen(f"upload is {current.state.value}", state=current.state.value)
        await self.blobs.stage_abort(session.staging_ref)
        self.audit.record(actor=caller.actor, namespace=caller.namespace, action="abort", result="ok")

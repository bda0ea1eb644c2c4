"""TTL expiry and safe garbage collection.

Four steps, each idempotent and restartable after a crash at any point, each safe to run on several replicas
at once:

``expire``
    Delete the rows of artifacts whose ``expires_at`` has passed (pinned ones never expire), in batches that
    replicas take with ``SKIP LOCKED``. Reads already answer "not found" from the moment of expiry; this only
    makes the rows go away and tells listeners (MCP subscribers) about it. Then delete the renditions (media
    views) past their expiry or whose source content no live artifact holds any more: their blobs are then
    unreferenced, and the ``blobs`` step frees them like any other. Last, delete the console sessions that
    have ended (they open nothing already).
``uploads``
    Completions whose process died (their completion lease ran out): back to ``open``. Upload sessions past
    their lease: move them to ``expired``, free their staging, drop the row; drop the rows of finished
    sessions past their lease; free staging areas no session knows (older than the grace period).
``blobs``
    Two-phase sweep of blobs no artifact or rendition references: mark when first seen unreferenced,
    tombstone once they stayed unreferenced for the grace period (with a zero grace, in the run that marks
    them; row locks make a concurrent dedup commit and the tombstone exclusive: the commit either keeps the
    blob live or stores its own new generation), delete the generation, then drop the row. A crash after the
    tombstone leaves a tombstoned row that the next run finishes.
``orphans``
    Storage objects no blob row names (a crash between publishing a generation and committing its row), older
    than the grace period: listed in pass one, re-checked against the metadata right before deleting in pass
    two. Also half-written temporary files and stale multipart uploads of interrupted writes.

The grace period is what keeps reads and writes in flight safe: a blob is deleted only after it stayed
unreferenced that long, and an object without a row only when it is older than that, so a download stream or a
presigned URL handed out before a delete, or a write between publishing and committing, finishes first.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import random
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import anyio

from blobstore import metrics
from blobstore.audit import AuditLog
from blobstore.cleanup_report import STEPS, CleanupProgress, CleanupReport, Step, StepResult
from blobstore.clock import Clock
from blobstore.completion_leases import CompletionLeases
from blobstore.config import Settings
from blobstore.errors import BlobstoreError, InvalidRequest
from blobstore.events import ArtifactChange, ArtifactEvent, ArtifactEvents
from blobstore.models import StoredObject, UploadSession, UploadState
from blobstore.records import CleanupRecords
from blobstore.storage.base import BlobStore

logger = logging.getLogger("blobstore.cleanup")

DEFAULT_BATCH_SIZE = 500
CLEANUP_ACTOR = "cleanup"

MARK_LOCK = "cleanup:mark-unreferenced"
STAGING_LOCK = "cleanup:staging-leftovers"
ORPHAN_LOCK = "cleanup:orphans"
TRIM_VIEWS_LOCK = "cleanup:trim-views"


@dataclass(frozen=True, slots=True)
class CleanupParts:
    """What cleanup runs work on: a store's settings, metadata, storage, completion leases, audit log,
    change events and clock. The composition root builds it (``Runtime.cleanup``,
    :func:`blobstore.runtime.cleanup_parts`)."""

    settings: Settings
    repo: CleanupRecords
    blobs: BlobStore
    leases: CompletionLeases
    audit: AuditLog
    events: ArtifactEvents
    clock: Clock


class Cleanup:
    """One cleanup run over a store's metadata and storage."""

    def __init__(
        self,
        *,
        repo: CleanupRecords,
        blobs: BlobStore,
        leases: CompletionLeases,
        audit: AuditLog,
        events: ArtifactEvents,
        clock: Clock,
        grace_seconds: int,
        upload_ttl_seconds: int,
        dry_run: bool = False,
        batch_size: int = DEFAULT_BATCH_SIZE,
        progress: CleanupProgress | None = None,
        view_cache_max_bytes: int | None = None,
    ) -> None:
        if grace_seconds < 0:
            raise InvalidRequest("grace must be >= 0 seconds")
        if batch_size <= 0:
            raise InvalidRequest("batch size must be positive")
        self.repo = repo
        self.blobs = blobs
        self.leases = leases
        self.audit = audit
        self.events = events
        self.clock = clock
        self.grace = timedelta(seconds=grace_seconds)
        self.upload_ttl = timedelta(seconds=upload_ttl_seconds)
        self.dry_run = dry_run
        self.batch_size = batch_size
        self.progress = progress
        self.view_cache_max_bytes = view_cache_max_bytes
        self._due_cache: tuple[datetime, dict[str, int]] | None = None

    async def run(self, steps: Sequence[Step] = STEPS) -> CleanupReport:
        report = CleanupReport(self.dry_run, int(self.grace.total_seconds()), self.clock())
        runners = {
            "expire": self.expire,
            "uploads": self.purge_uploads,
            "blobs": self.sweep_blobs,
            "orphans": self.sweep_orphans,
        }
        for step in STEPS:
            if step in steps:
                # Each step is idempotent, so on a full disk it may run again with the reserve's room.
                result = await self.repo.freeing(runners[step])
                if self.progress is not None:
                    self.progress.step_finished(step)
                logger.info(
                    "cleanup %s%s: %d items, %d bytes %s",
                    step,
                    " (dry run)" if self.dry_run else "",
                    result.items,
                    result.bytes,
                    result.details,
                )
                report.steps.append(result)
                if not self.dry_run:
                    metrics.CLEANUP_FREED_BYTES.labels(step).inc(result.bytes)
        if not self.dry_run:
            await self.repo.keep_reserve()
            metrics.CLEANUP_RUNS.inc()
        return report

    async def _due(self, now: datetime) -> dict[str, int]:
        """What is due, for a dry run's figures and a progress bar's totals; a plain run does without."""
        if not self.dry_run and self.progress is None:
            return {}
        if self._due_cache is None or self._due_cache[0] != now:
            self._due_cache = (now, await self.repo.cleanup_due(now=now, older_than=now - self.grace))
        return self._due_cache[1]

    async def _start(self, step: Step, total: str) -> tuple[StepResult, datetime, dict[str, int]]:
        """A step's empty result, the moment it runs at and what is due then, with the progress bar told
        the step's ``total`` (a key of the figures due)."""
        now = self.clock()
        due = await self._due(now)
        self._started(step, due.get(total))
        return StepResult(step), now, due

    def _started(self, step: Step, total: int | None) -> None:
        if self.progress is not None:
            self.progress.step_started(step, total)

    def _advance(self, step: Step, count: int = 1) -> None:
        if self.progress is not None and count:
            self.progress.advanced(step, count)

    # -- expire ----------------------------------------------------------------------------------------------

    async def expire(self) -> StepResult:
        result, now, due = await self._start("expire", "expired_artifacts")
        if self.dry_run:
            result.items = due["expired_artifacts"]
            result.expired_bytes = due["expired_artifact_bytes"]
            views, _ = await self.repo.renditions_due(now=now)
            if views:
                result.add("views_removed", views)
            sessions = await self.repo.count_ended_console_sessions(now=now)
            if sessions:
                result.add("console_sessions", sessions)
            return result
        await self._expire_artifacts(now, result)
        await self._remove_renditions(now, result)
        if self.view_cache_max_bytes is not None:
            await self._trim_renditions(self.view_cache_max_bytes, result)
        sessions = await self.repo.remove_ended_console_sessions(now=now)
        if sessions:
            result.add("console_sessions", sessions)
        return result

    async def _expire_artifacts(self, now: datetime, result: StepResult) -> None:
        while True:
            batch = await self.repo.expire_artifacts(now=now, limit=self.batch_size)
            for artifact in batch:
                result.items += 1
                result.expired_bytes += artifact.size
                self.audit.record(
                    actor=CLEANUP_ACTOR,
                    namespace=artifact.namespace,
                    action="expire",
                    result="ok",
                    artifact_id=artifact.id,
                    size=artifact.size,
                    mime_type=artifact.mime_type,
                )
                await self.events.emit(ArtifactEvent(ArtifactChange.EXPIRED, artifact.id, artifact.namespace))
            self._advance("expire", len(batch))
            if len(batch) < self.batch_size:
                return

    async def _remove_renditions(self, now: datetime, result: StepResult) -> None:
        """Media views live as long as the longest-lived artifact they were made for, and no longer than some
        live artifact holds their source content (a pinned source's views go when it is deleted)."""
        while True:
            batch = await self.repo.remove_renditions(now=now, limit=self.batch_size)
            if batch:
                result.add("views_removed", len(batch))
            if len(batch) < self.batch_size:
                return

    async def _trim_renditions(self, max_bytes: int, result: StepResult) -> None:
        """The oldest media views go while the cached ones add up to more than ``max_bytes``."""
        async with self.repo.try_advisory_lock(TRIM_VIEWS_LOCK) as mine:
            # One trimmer at a time: two would each delete the same excess.
            if not mine:
                return
            while batch := await self.repo.trim_renditions(max_bytes=max_bytes, limit=self.batch_size):
                result.add("views_trimmed", len(batch))

    # -- uploads ---------------------------------------------------------------------------------------------

    async def purge_uploads(self) -> StepResult:
        result, now, due = await self._start("uploads", "expired_uploads")
        if self.dry_run:
            result.items = due["expired_uploads"]
            await self._recover_completions(now, result)
            await self._staging_leftovers(now, result)
            return result
        await self._recover_completions(now, result)
        await self._expire_open_uploads(now, result)
        await self._drop_finished_uploads(now, result)
        await self._staging_leftovers(now, result)
        return result

    async def _recover_completions(self, now: datetime, result: StepResult) -> None:
        """Roll completions whose completer is gone back to ``open`` (a dry run only counts them)."""
        leases = self.leases
        after = ""
        while True:
            batch = await self.repo.list_completing_uploads(after_id=after, limit=self.batch_size)
            for session in batch:
                if not leases.abandoned(session, now):
                    continue
                if self.dry_run or await leases.recover(session, actor=CLEANUP_ACTOR):
                    result.add("completions_recovered")
            if len(batch) < self.batch_size:
                return
            after = batch[-1].id

    async def _expire_open_uploads(self, now: datetime, result: StepResult) -> None:
        seen: set[str] = set()
        while True:
            batch = await self.repo.list_expired_uploads(now=now, limit=self.batch_size)
            fresh = [session for session in batch if session.id not in seen]
            seen.update(session.id for session in fresh)
            for session in fresh:
                await self._expire_upload(session, now, result)
            if len(batch) < self.batch_size or not fresh:
                return

    async def _expire_upload(self, session: UploadSession, now: datetime, result: StepResult) -> None:
        if session.state is UploadState.COMPLETING and not self.leases.abandoned(session, now):
            # A live completer (it keeps renewing its lease) is still reading the staged chunks.
            result.add("completing_deferred")
            return
        # Compare-and-set first: a completion that won the race keeps its staging, and a crash after this
        # point leaves an ``expired`` row that the finished-uploads pass below completes.
        won = await self.repo.transition_upload(
            session.id, from_states=[session.state], to_state=UploadState.EXPIRED, now=now
        )
        if not won:
            return
        staged = sum(chunk.size for chunk in await self.repo.list_chunks(session.id))
        await self.blobs.stage_abort(session.staging_ref)
        await self.repo.delete_upload(session.id)
        result.items += 1
        result.bytes += staged
        self._advance("uploads")
        self.audit.record(
            actor=CLEANUP_ACTOR, namespace=session.namespace, action="upload_expire", result="ok", size=staged
        )

    async def _drop_finished_uploads(self, now: datetime, result: StepResult) -> None:
        while True:
            batch = await self.repo.list_finished_uploads(before=now, limit=self.batch_size)
            for session in batch:
                # Completion and abort free staging themselves; a crash may have cut that short, and freeing
                # twice is harmless.
                await self.blobs.stage_abort(session.staging_ref)
                if await self.repo.delete_upload(session.id):
                    result.add("finished_rows")
            if len(batch) < self.batch_size:
                return

    async def _staging_leftovers(self, now: datetime, result: StepResult) -> None:
        async with self.repo.try_advisory_lock(STAGING_LOCK) as mine:
            if not mine:
                result.add("staging_sweep_skipped")
                return
            # Staging is created just before its session row is inserted; the age cut keeps that window safe.
            cutoff = now - self.grace
            old = [entry.staging_ref async for entry in self.blobs.iter_staging() if entry.modified < cutoff]
            unknown = _unknown(old, await self.repo.known_staging_refs(old))
            # Pass two: re-check right before freeing; a session committed during the listing keeps its area.
            unknown = _unknown(unknown, await self.repo.known_staging_refs(unknown))
            for ref in unknown:
                if not self.dry_run:
                    await self.blobs.stage_abort(ref)
                result.add("staging_leftovers")

    # -- blobs -----------------------------------------------------------------------------------------------

    async def sweep_blobs(self) -> StepResult:
        result, now, due = await self._start("blobs", "blobs_due")
        # Marks carry ``now`` and "unreferenced since before" is strict, so with no grace at all the cut is a
        # tick later: what this run marks is due in this run (``cleanup --grace 0`` frees in one go).
        older_than = now - self.grace if self.grace else now + timedelta(microseconds=1)
        if self.dry_run:
            result.items = due["blobs_due"]
            result.bytes = due["blob_bytes_due"]
            result.details["unreferenced_in_grace"] = due["unreferenced_blobs"] - (
                due["blobs_due"] - due["tombstoned_blobs"]
            )
            return result
        async with self.repo.try_advisory_lock(MARK_LOCK) as mine:
            # One marker at a time: two bulk UPDATEs over the same rows in different orders could deadlock.
            if mine:
                result.add("marked_unreferenced", await self.repo.mark_unreferenced_blobs(now=now))
        while True:
            claimed = await self.repo.claim_unreferenced_blobs(
                older_than=older_than, now=now, limit=self.batch_size
            )
            result.add("tombstoned", len(claimed))
            if len(claimed) < self.batch_size:
                break
        # Finish every tombstone, this run's and any a crashed or concurrent run left: the row names a
        # generation nothing can reference any more, so deleting it twice is harmless.
        while True:
            batch = await self.repo.list_tombstoned_blobs(limit=self.batch_size)
            for record in batch:
                await self.blobs.delete(record.info.key)
                if await self.repo.drop_blob(record.id):
                    result.items += 1
                    result.bytes += record.info.size
                    self._advance("blobs")
            if len(batch) < self.batch_size:
                return result

    # -- orphans ---------------------------------------------------------------------------------------------

    async def sweep_orphans(self) -> StepResult:
        result = StepResult("orphans")
        now = self.clock()
        self._started("orphans", None)
        async with self.repo.try_advisory_lock(ORPHAN_LOCK) as mine:
            if not mine:
                result.skipped = "another cleanup is sweeping orphans"
                return result
            cutoff = now - self.grace
            candidates: list[StoredObject] = []
            batch: list[StoredObject] = []
            async for stored in self.blobs.iter_objects():
                if stored.modified < cutoff:
                    batch.append(stored)
                if len(batch) >= self.batch_size:
                    candidates += await self._without_rows(batch)
                    batch = []
            candidates += await self._without_rows(batch)
            for start in range(0, len(candidates), self.batch_size):
                # Pass two: a row committed since pass one (a very late commit) keeps its object.
                for stored in await self._without_rows(candidates[start : start + self.batch_size]):
                    if not self.dry_run:
                        await self.blobs.delete(stored.key)
                    result.items += 1
                    result.bytes += stored.size
                    self._advance("orphans")
            if not self.dry_run:
                # An interrupted put or join may have run as long as an upload may live (S3 multipart uploads
                # are dated by their start, not their last part). Local temp files tell whether their writer
                # still lives, so those of dead writers go once the grace has passed.
                longest_write = max(self.grace, self.upload_ttl)
                swept = await self.blobs.sweep_temp(now - longest_write, abandoned_before=now - self.grace)
                result.add("temp_files", swept)
        return result

    async def _without_rows(self, objects: Sequence[StoredObject]) -> list[StoredObject]:
        if not objects:
            return []
        known = await self.repo.known_storage_keys([stored.key for stored in objects])
        return [stored for stored in objects if stored.key not in known]


def _unknown(refs: Sequence[str], known: set[str]) -> list[str]:
    return [ref for ref in refs if ref not in known]


async def run_cleanup(
    parts: CleanupParts,
    *,
    steps: Sequence[Step] = STEPS,
    dry_run: bool = False,
    grace_seconds: int | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: CleanupProgress | None = None,
) -> CleanupReport:
    """Run the cleanup ``steps`` (all by default, in order) once over ``parts``' stores and report what
    they freed; ``grace_seconds`` defaults to the settings' grace period."""
    settings = parts.settings
    cleanup = Cleanup(
        repo=parts.repo,
        blobs=parts.blobs,
        leases=parts.leases,
        audit=parts.audit,
        events=parts.events,
        clock=parts.clock,
        grace_seconds=settings.gc_grace_seconds if grace_seconds is None else grace_seconds,
        upload_ttl_seconds=settings.upload_ttl_seconds,
        dry_run=dry_run,
        batch_size=batch_size,
        progress=progress,
        view_cache_max_bytes=settings.view_cache_max_bytes,
    )
    return await cleanup.run(steps)


async def run_periodic_cleanup(
    parts: CleanupParts,
    interval: float,
    *,
    grace_seconds: int | None = None,
    stop: anyio.Event | None = None,
) -> None:
    """Run a full cleanup every ``interval`` seconds (with ±10 % jitter) until ``stop`` is set (or cancelled).

    Meant for a server's lifespan task group. A failed run is logged and the next one tried: storage or the
    database being briefly unavailable must not stop cleanup for the life of the server. ``stop`` ends the
    loop between runs: a run under way finishes first.
    """
    if interval <= 0:
        raise InvalidRequest("cleanup interval must be positive")
    stop = stop if stop is not None else anyio.Event()
    while True:
        # Jitter keeps replicas started together from sweeping in lockstep.
        with anyio.move_on_after(interval * random.uniform(0.9, 1.1)):
            await stop.wait()
        if stop.is_set():
            return
        try:
            report = await run_cleanup(parts, grace_seconds=grace_seconds)
        except BlobstoreError as exc:
            logger.error("periodic cleanup failed: %s (%s)", exc.message, exc.code)
            continue
        except Exception as exc:
            # Exception text may carry SQL parameters (storage keys embed digests): log the type only.
            logger.error("periodic cleanup failed: %s", type(exc).__name__)
            continue
        logger.info("periodic cleanup freed %d items, %d bytes", report.items, report.bytes)


@contextlib.asynccontextmanager
async def periodic_cleanup(
    parts: CleanupParts, interval: float | None, *, grace_seconds: int | None = None
) -> AsyncIterator[None]:
    """Run :func:`run_periodic_cleanup` in the background for the duration of the block (no-op for None).

    Leaving the block waits for a run under way to finish instead of cancelling it: a database call
    cancelled half-way invalidates its connection, and SQLAlchemy's aiosqlite adapter then leaves the close
    of that connection waiting for good, which holds up the event loop's shutdown. A cancellation from
    outside (the block's own task cancelled) still cancels the run.

    For a server lifespan: ``await stack.enter_async_context(periodic_cleanup(runtime.cleanup,
    settings.cleanup_interval_seconds))``.
    """
    if interval is None:
        yield
        return
    stop = anyio.Event()
    async with anyio.create_task_group() as group:
        group.start_soon(
            functools.partial(run_periodic_cleanup, parts, interval, grace_seconds=grace_seconds, stop=stop)
        )
        try:
            yield
        finally:
            stop.set()

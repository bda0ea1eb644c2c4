"""The composition root: settings → repository, blob store, audit log → one clock, the publisher, upload
sessions and their completion leases → service, tus, authenticator, cleanup, held together in one
:class:`Runtime`. The only place that picks concrete backends and wires collaborators; the edges (HTTP app,
MCP server, CLI) receive what it built.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

import anyio
import anyio.to_thread
from sqlalchemy.engine import make_url

from blobstore.audit import STDOUT, AuditLog
from blobstore.auth import Authenticator
from blobstore.cleanup import CleanupParts, periodic_cleanup
from blobstore.completion_leases import CompletionLeases
from blobstore.config import Settings
from blobstore.console_sessions import ConsoleSessions
from blobstore.datadir import DataDirLock
from blobstore.diskspace import RESERVE_FILE_NAME, SpaceReserve
from blobstore.errors import DatabaseNotMigrated
from blobstore.events import ArtifactEvents
from blobstore.link_keys import LinkKeys
from blobstore.metadata.engine import sqlite_file
from blobstore.metadata.migrate import HEAD_REVISION, current_revision_async, upgrade_async
from blobstore.metadata.repository import MetadataRepository
from blobstore.publishing import Publisher
from blobstore.service import ArtifactService
from blobstore.share_links import ShareLinks
from blobstore.storage import BlobStore, open_blob_store
from blobstore.store_clock import StoreClock
from blobstore.tus_uploads import TusUploads
from blobstore.upload_sessions import UploadManager
from blobstore.views.engine import views_for

logger = logging.getLogger("blobstore")


@dataclass(frozen=True, slots=True)
class Runtime:
    """Everything a running store is made of, built once from settings (never at import)."""

    settings: Settings
    service: ArtifactService
    tus: TusUploads
    """One per running store: requests for one upload share its lock."""
    authenticator: Authenticator
    cleanup: CleanupParts
    console_sessions: ConsoleSessions
    """The web console's logins, kept in the metadata database (every replica shares them)."""

    @property
    def repo(self) -> MetadataRepository:
        return self.service.repo

    @property
    def blobs(self) -> BlobStore:
        return self.service.blobs

    @property
    def uploads(self) -> UploadManager:
        return self.service.uploads


def build_service(
    *,
    settings: Settings,
    blobs: BlobStore,
    repo: MetadataRepository,
    audit: AuditLog | None = None,
    clock: StoreClock | None = None,
    sole_server: bool = False,
) -> ArtifactService:
    """The service over open stores, with the publisher, the upload manager and its completion leases, and the
    share links it uses, all on one clock (a new :class:`StoreClock` unless given)."""
    audit = audit or AuditLog()
    clock = clock or StoreClock()
    keys = LinkKeys(repo, configured=settings.link_key, data_dir=settings.data_dir, clock=clock)
    events = ArtifactEvents()
    publisher = Publisher(settings=settings, blobs=blobs, repo=repo, audit=audit, events=events, clock=clock)
    leases = CompletionLeases(
        repo=repo,
        audit=audit,
        clock=clock,
        lease_seconds=settings.completion_lease_seconds,
        sole_server=sole_server,
    )
    uploads = UploadManager(
        settings=settings,
        repo=repo,
        blobs=blobs,
        audit=audit,
        clock=clock,
        publisher=publisher,
        leases=leases,
    )
    return ArtifactService(
        settings=settings,
        blobs=blobs,
        repo=repo,
        publisher=publisher,
        uploads=uploads,
        audit=audit,
        events=events,
        clock=clock,
        share_links=ShareLinks(keys, repo, clock),
    )


def cleanup_parts(service: ArtifactService) -> CleanupParts:
    """What a cleanup run over ``service``'s stores works on (:func:`blobstore.cleanup.run_cleanup`)."""
    return CleanupParts(
        settings=service.settings,
        repo=service.repo,
        blobs=service.blobs,
        leases=service.uploads.leases,
        audit=service.audit,
        events=service.events,
        clock=service.clock,
    )


def compose(service: ArtifactService) -> Runtime:
    """The runtime around an open service: its stores, and the tus layer, authenticator and cleanup over
    them, on the service's clock."""
    # Uploads of PDFs, audio and video get the facts only a decoder finds (page count, measured duration).
    service.publisher.media_prober = views_for(service).probe_blob
    authenticator = Authenticator.for_settings(
        service.settings, service.repo, audit=service.audit, clock=service.clock
    )
    return Runtime(
        settings=service.settings,
        service=service,
        tus=TusUploads(
            settings=service.settings, uploads=service.uploads, repo=service.repo, clock=service.clock
        ),
        authenticator=authenticator,
        cleanup=cleanup_parts(service),
        console_sessions=ConsoleSessions(
            service.repo,
            authenticator,
            idle_seconds=service.settings.console_session_idle_seconds,
            absolute_seconds=service.settings.console_session_seconds,
            clock=service.clock,
        ),
    )


def prepare_data_dir(settings: Settings) -> None:
    """Create the data directory 0700 (it holds the SQLite file and, by default, the blobs), in every mode."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    settings.data_dir.chmod(0o700)


def disk_reserve(settings: Settings, *, server: bool) -> SpaceReserve | None:
    """The disk reserve beside a SQLite database (see :mod:`blobstore.diskspace`); a server owns it."""
    database = sqlite_file(settings.resolved_database_url)
    if database is None or settings.disk_reserve_bytes <= 0:
        return None
    return SpaceReserve(database.parent / RESERVE_FILE_NAME, settings.disk_reserve_bytes, owner=server)


def open_audit_log(settings: Settings, reserve: SpaceReserve | None = None) -> AuditLog:
    """The audit log the settings name; its default place, the data directory, is created (0700) if missing,
    also when the data directory holds nothing else (PostgreSQL and S3).

    In its default place it shares the file system of the disk reserve, which a full disk may release for it.
    """
    path = settings.resolved_audit_log
    if path != STDOUT and settings.audit_log is None:
        settings.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        if reserve is not None and reserve.path.parent == settings.data_dir:
            return AuditLog(path, on_full=reserve.release)
    return AuditLog(path)


async def prepare_to_serve(settings: Settings) -> str | None:
    """What ``blobstore serve`` does before it listens: the data directory, the schema, the storage.

    Pending migrations are applied on every database (replicas starting together are serialized by the
    migration's lock). The storage is probed: on S3 the bucket must exist and be writable, and what the
    endpoint supports is found out; a failure is ``StorageUnavailable`` naming the bucket and endpoint.
    Returns what the probe found, in words (:func:`probe_storage`).
    """
    prepare_data_dir(settings)
    await upgrade_async(settings.resolved_database_url)
    return await probe_storage(settings)


def blob_store_for(settings: Settings) -> BlobStore:
    """The blob store the settings name (not yet probed)."""
    return open_blob_store(
        settings.resolved_storage_url,
        s3_endpoint_url=settings.s3_endpoint_url,
        s3_region=settings.s3_region,
        block_size=settings.storage_chunk_size,
        io_threads=settings.io_threads,
        data_dir=settings.data_dir,
        verified_block_seconds=settings.verified_block_seconds,
    )


async def probe_storage(settings: Settings) -> str | None:
    """Open the configured storage and run its start-up probe, where the backend has one (S3); what it found
    in words (``S3 bucket s3://media/blobs at http://minio:9000: conditional writes yes, …``), or None."""
    blobs = blob_store_for(settings)
    try:
        probe = getattr(blobs, "probe", None)
        return None if probe is None else str(await probe())
    finally:
        await blobs.close()


async def require_migrated(database_url: str) -> None:
    """Raise :class:`DatabaseNotMigrated`, naming the database (without its password) and both revisions,
    unless the schema is at this version's newest migration: without it every query would fail on a missing
    table or column."""
    current = await current_revision_async(database_url)
    newest = HEAD_REVISION
    if current == newest:
        return
    shown = make_url(database_url).render_as_string(hide_password=True)
    where = (
        "was never migrated" if current is None else f"is at revision {current}, this version needs {newest}"
    )
    raise DatabaseNotMigrated(f"the metadata database {shown} {where}: run `blobstore migrate`")


async def prepare_schema(database_url: str, *, migrate: bool) -> None:
    """Apply pending migrations, or (for what must not change the schema on its own) require that none is
    pending."""
    if migrate:
        await upgrade_async(database_url)
    else:
        await require_migrated(database_url)


@contextlib.asynccontextmanager
async def open_service(
    settings: Settings, *, server: bool = False, migrate: bool | None = None
) -> AsyncIterator[ArtifactService]:
    """Open storage and metadata, yield the service, close both (see :func:`open_runtime`)."""
    async with open_runtime(settings, server=server, migrate=migrate) as runtime:
        yield runtime.service


@contextlib.asynccontextmanager
async def serve(settings: Settings) -> AsyncIterator[Runtime]:
    """A server's runtime: opened as the one server of its data directory, the storage probed for what it
    supports (S3: conditional writes, UploadPartCopy, aborts), periodic cleanup running in the background."""
    async with open_runtime(settings, server=True) as runtime:
        probe = getattr(runtime.blobs, "probe", None)
        if probe is not None:
            await probe()
        async with periodic_cleanup(runtime.cleanup, settings.cleanup_interval_seconds):
            yield runtime


@contextlib.asynccontextmanager
async def open_runtime(
    settings: Settings, *, server: bool = False, migrate: bool | None = None
) -> AsyncIterator[Runtime]:
    """Open storage and metadata, yield the runtime built on them, close both.

    ``server=True`` takes the data-directory lock in SQLite mode, so a second server cannot open the same data
    directory; admin commands pass ``server=False`` and work beside a running server. Migrations run at start
    on the embedded default (``migrate=None``) or when asked; otherwise a schema that is not at the newest
    migration raises :class:`DatabaseNotMigrated`.
    """
    with contextlib.ExitStack() as stack:
        sole_server = False
        prepare_data_dir(settings)
        if settings.is_embedded and server:
            stack.enter_context(DataDirLock(settings.data_dir))
            sole_server = True
        reserve = disk_reserve(settings, server=server)
        # On a full disk SQLite cannot even open (it creates its write-ahead log and index): make room first.
        released = await anyio.to_thread.run_sync(reserve.release_if_full) if reserve is not None else 0
        await prepare_schema(
            settings.resolved_database_url, migrate=migrate if migrate is not None else settings.is_embedded
        )
        repo = await MetadataRepository.open(settings.resolved_database_url, reserve=reserve)
        try:
            # After a release the room is the database's until its connections are open: the readiness
            # probe tops the reserve up from then on.
            if server and not released and not await repo.keep_reserve():
                logger.warning("the disk reserve could not be allocated in full: the disk is nearly full")
            blobs = blob_store_for(settings)
            audit = open_audit_log(settings, reserve)
            try:
                service = build_service(
                    settings=settings, blobs=blobs, repo=repo, audit=audit, sole_server=sole_server
                )
                yield compose(service)
            finally:
                audit.close()
                await blobs.close()
        finally:
            await repo.close()


@contextlib.asynccontextmanager
async def open_repository(settings: Settings) -> AsyncIterator[MetadataRepository]:
    """The metadata repository alone (token administration), the embedded database created or brought up to
    date first; any other must be migrated already (:class:`DatabaseNotMigrated`)."""
    if settings.is_embedded:
        prepare_data_dir(settings)
    await prepare_schema(settings.resolved_database_url, migrate=settings.is_embedded)
    repo = await MetadataRepository.open(settings.resolved_database_url)
    try:
        yield repo
    finally:
        await repo.close()


async def count_active_tokens(settings: Settings) -> int:
    """Active tokens in the configured database, which may not exist yet (a first start in SQLite mode)."""
    if settings.is_embedded:
        path = make_url(settings.resolved_database_url).database
        if not path or not await anyio.Path(path).exists():
            return 0
    async with open_repository(settings) as repo:
        return await repo.count_tokens()

"""Composition of the service from settings: the only place (with the CLI) that picks concrete backends."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

import anyio.to_thread

from blobstore.audit import STDOUT, AuditLog
from blobstore.config import Settings
from blobstore.datadir import DataDirLock
from blobstore.diskspace import RESERVE_FILE_NAME, SpaceReserve
from blobstore.metadata.engine import sqlite_file
from blobstore.metadata.migrate import upgrade_async
from blobstore.metadata.repository import MetadataRepository
from blobstore.service import ArtifactService
from blobstore.storage import BlobStore, open_blob_store

logger = logging.getLogger("blobstore")


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


async def prepare_to_serve(settings: Settings) -> None:
    """What ``blobstore serve`` does before it listens: the data directory, the schema, the storage.

    Pending migrations are applied on every database (replicas starting together are serialized by the
    migration's lock). The storage is probed: on S3 the bucket must exist and be writable, and what the
    endpoint supports is found out; a failure is ``StorageUnavailable`` naming the bucket and endpoint.
    """
    prepare_data_dir(settings)
    await upgrade_async(settings.resolved_database_url)
    await probe_storage(settings)


def blob_store_for(settings: Settings) -> BlobStore:
    """The blob store the settings name (not yet probed)."""
    return open_blob_store(
        settings.resolved_storage_url,
        s3_endpoint_url=settings.s3_endpoint_url,
        s3_region=settings.s3_region,
        storage_chunk_size=settings.storage_chunk_size,
        io_threads=settings.io_threads,
        data_dir=settings.data_dir,
    )


async def probe_storage(settings: Settings) -> None:
    """Open the configured storage and run its start-up probe, where the backend has one (S3)."""
    blobs = blob_store_for(settings)
    try:
        probe = getattr(blobs, "probe", None)
        if probe is not None:
            await probe()
    finally:
        await blobs.close()


@contextlib.asynccontextmanager
async def open_service(
    settings: Settings, *, server: bool = False, migrate: bool | None = None
) -> AsyncIterator[ArtifactService]:
    """Open storage and metadata, yield the service, close both.

    ``server=True`` takes the data-directory lock in SQLite mode, so a second server cannot open the same data
    directory; admin commands pass ``server=False`` and work beside a running server. Migrations run at start
    on the embedded default (``migrate=None``) or when asked.
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
        if migrate if migrate is not None else settings.is_embedded:
            await upgrade_async(settings.resolved_database_url)
        repo = await MetadataRepository.open(settings.resolved_database_url, reserve=reserve)
        try:
            # After a release the room is the database's until its connections are open: the readiness
            # probe tops the reserve up from then on.
            if server and not released and not await repo.keep_reserve():
                logger.warning("the disk reserve could not be allocated in full: the disk is nearly full")
            blobs = blob_store_for(settings)
            try:
                yield ArtifactService(
                    settings=settings,
                    blobs=blobs,
                    repo=repo,
                    audit=open_audit_log(settings, reserve),
                    sole_server=sole_server,
                )
            finally:
                await blobs.close()
        finally:
            await repo.close()

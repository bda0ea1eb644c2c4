"""Composition of the service from settings: the only place (with the CLI) that picks concrete backends."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

from blobstore.audit import AuditLog
from blobstore.config import Settings
from blobstore.metadata.lock import DataDirLock
from blobstore.metadata.migrate import upgrade_async
from blobstore.metadata.repository import MetadataRepository
from blobstore.service import ArtifactService
from blobstore.storage import open_blob_store

logger = logging.getLogger("blobstore")


def prepare_data_dir(settings: Settings) -> None:
    """Create the data directory 0700 (it holds the SQLite file and, by default, the blobs), in every mode."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    settings.data_dir.chmod(0o700)


async def prepare_to_serve(settings: Settings) -> None:
    """What ``blobstore serve`` does before it listens: the data directory, the schema, the storage.

    Pending migrations are applied on every database (replicas starting together are serialized by the
    migration's lock). The storage is probed: on S3 the bucket must exist and be writable, and what the
    endpoint supports is found out; a failure is ``StorageUnavailable`` naming the bucket and endpoint.
    """
    prepare_data_dir(settings)
    await upgrade_async(settings.resolved_database_url)
    await probe_storage(settings)


async def probe_storage(settings: Settings) -> None:
    """Open the configured storage and run its start-up probe, where the backend has one (S3)."""
    blobs = open_blob_store(
        settings.resolved_storage_url,
        s3_endpoint_url=settings.s3_endpoint_url,
        s3_region=settings.s3_region,
        storage_chunk_size=settings.storage_chunk_size,
        io_threads=settings.io_threads,
        data_dir=settings.data_dir,
    )
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
        prepare_data_dir(settings)
        if settings.is_embedded and server:
            stack.enter_context(DataDirLock(settings.data_dir))
        if migrate if migrate is not None else settings.is_embedded:
            await upgrade_async(settings.resolved_database_url)
        repo = await MetadataRepository.open(settings.resolved_database_url)
        try:
            blobs = open_blob_store(
                settings.resolved_storage_url,
                s3_endpoint_url=settings.s3_endpoint_url,
                s3_region=settings.s3_region,
                storage_chunk_size=settings.storage_chunk_size,
                io_threads=settings.io_threads,
                data_dir=settings.data_dir,
            )
            try:
                yield ArtifactService(
                    settings=settings, blobs=blobs, repo=repo, audit=AuditLog(settings.audit_log)
                )
            finally:
                await blobs.close()
        finally:
            await repo.close()

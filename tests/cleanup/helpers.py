"""Shared helpers: a controllable clock, uploads from bytes, and the store-wide consistency check."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from blobstore.cleanup import run_cleanup
from blobstore.cleanup_report import StepResult
from blobstore.metadata.tables import artifacts, blobs, uploads
from blobstore.models import Artifact, Caller
from blobstore.runtime import cleanup_parts
from blobstore.service import ArtifactService
from tests.fixtures.streams import chunks_of
from tests.fixtures.streams import read_back as read_back

GRACE = 600
UPLOAD_TTL = 3600


class FakeClock:
    """Starts at the real time (storage listings carry real modification times) and moves only when told."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def advance_past_storage(self, seconds: float) -> None:
        """Move ``seconds`` past the later of this clock and the real time.

        Storage listings carry the storage server's real modification times, which on a loaded machine can be
        seconds later than when this clock was started: ages measured against them must start from now.
        """
        self.now = max(self.now, datetime.now(UTC)) + timedelta(seconds=seconds)


async def upload(
    service: ArtifactService,
    caller: Caller,
    data: bytes,
    *,
    name: str = "a.bin",
    mime_type: str = "application/octet-stream",
    **options: object,
) -> Artifact:
    return await service.create_artifact(
        caller,
        chunks_of(data, 3000),
        name=name,
        mime_type=mime_type,
        **options,  # type: ignore[arg-type]
    )


async def deleted(service: ArtifactService, caller: Caller, data: bytes) -> Artifact:
    """An artifact of ``data`` uploaded and deleted again: its blob is unreferenced unless another artifact
    holds the same content."""
    artifact = await upload(service, caller, data)
    await service.delete_artifact(caller, artifact.id)
    return artifact


async def sweep_blobs(service: ArtifactService) -> StepResult:
    """One cleanup run of the blob sweep alone: what it reports."""
    return (await run_cleanup(cleanup_parts(service), steps=["blobs"])).step("blobs")


async def storage_keys(service: ArtifactService) -> set[str]:
    return {stored.key async for stored in service.blobs.iter_objects()}


async def staging_refs(service: ArtifactService) -> set[str]:
    return {entry.staging_ref async for entry in service.blobs.iter_staging()}


async def blob_rows(service: ArtifactService) -> list[dict[str, object]]:
    async with service.repo.engine.connect() as conn:
        rows = (await conn.execute(sa.select(blobs))).all()
    return [dict(row._mapping) for row in rows]


async def artifact_rows(service: ArtifactService) -> list[dict[str, object]]:
    async with service.repo.engine.connect() as conn:
        rows = (await conn.execute(sa.select(artifacts))).all()
    return [dict(row._mapping) for row in rows]


async def assert_consistent(service: ArtifactService, *, swept: bool) -> dict[str, int]:
    """Every artifact row reads back with its sha256 and points at a live blob whose object exists.

    With ``swept`` (a full cleanup ran after the grace period): no blob row without an artifact, no object
    without a row, no staging area left. Returns counts for the caller's report.
    """
    rows = await artifact_rows(service)
    blob_by_id = {row["id"]: row for row in await blob_rows(service)}
    keys = await storage_keys(service)
    for row in rows:
        blob = blob_by_id.get(row["blob_id"])
        assert blob is not None, "artifact points at a missing blob row"
        assert blob["state"] == "live", "artifact points at a tombstoned blob"
        assert blob["storage_key"] in keys, "artifact's blob object is missing"
        caller = Caller(namespace=str(row["namespace"]))
        if row["expires_at"] is None or row["pinned"] or row["expires_at"] > service.clock():  # type: ignore[operator]
            data = await read_back(service, caller, str(row["id"]))
            assert hashlib.sha256(data).hexdigest() == row["sha256"]
    if swept:
        referenced = {row["blob_id"] for row in rows}
        assert set(blob_by_id) == referenced, "unreferenced blob rows survived a full cleanup"
        assert keys == {blob["storage_key"] for blob in blob_by_id.values()}, "objects without rows survived"
        async with service.repo.engine.connect() as conn:
            owned = set((await conn.execute(sa.select(uploads.c.staging_ref))).scalars())
        assert await staging_refs(service) <= owned, "staging leftovers survived a full cleanup"
    return {"artifacts": len(rows), "blobs": len(blob_by_id), "objects": len(keys)}

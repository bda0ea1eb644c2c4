"""Blob rows: one stored generation each, read by id or page by page."""

from __future__ import annotations

import sqlalchemy as sa

from blobstore.metadata.repository import rows
from blobstore.metadata.repository.base import RepositoryBase
from blobstore.metadata.tables import blobs
from blobstore.models import BlobRecord


class BlobRepository(RepositoryBase):
    """Blob rows by id."""

    async def get_blob(self, blob_id: int) -> BlobRecord | None:
        async with self._reader.connect() as conn:
            row = (await conn.execute(sa.select(blobs).where(blobs.c.id == blob_id))).first()
        return None if row is None else rows.blob_record(row._mapping)

    async def list_blobs(self, *, after_id: int, limit: int) -> list[BlobRecord]:
        """A keyset page of blob rows (any state) with ``id > after_id``, by id."""
        selected = await self._all(
            sa.select(blobs).where(blobs.c.id > after_id).order_by(blobs.c.id).limit(limit)
        )
        return [rows.blob_record(row._mapping) for row in selected]

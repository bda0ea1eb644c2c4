"""The counts of ``blobstore stats``."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

from blobstore.metadata.repository.base import OPEN_STATES, RepositoryBase, visible
from blobstore.metadata.tables import artifacts, blobs, renditions, uploads


class StatsRepository(RepositoryBase):
    """Counts over the whole store."""

    async def stats(self, *, now: datetime) -> dict[str, int]:
        """Counts for ``blobstore stats``; stored bytes include tombstoned blobs not yet deleted."""
        async with self._reader.begin() as conn:
            artifact_row = (
                await conn.execute(
                    sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(artifacts.c.size), 0)).where(
                        visible(now)
                    )
                )
            ).one()
            blob_row = (
                await conn.execute(sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(blobs.c.size), 0)))
            ).one()
            rendition_row = (
                await conn.execute(
                    sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(renditions.c.size), 0))
                )
            ).one()
            open_uploads = await conn.scalar(
                sa.select(sa.func.count()).select_from(uploads).where(uploads.c.state.in_(OPEN_STATES))
            )
        return {
            "artifacts": int(artifact_row[0]),
            "blobs": int(blob_row[0]),
            "bytes_stored": int(blob_row[1]),
            "bytes_logical": int(artifact_row[1]),
            "open_uploads": int(open_uploads or 0),
            "renditions": int(rendition_row[0]),
            "rendition_bytes": int(rendition_row[1]),
        }

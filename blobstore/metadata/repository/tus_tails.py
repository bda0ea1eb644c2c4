"""tus upload tails: the bytes of an unfinished tus upload past its last whole staged chunk, kept in the
database beside the offset they extend (see "Why tus tails live in the database" in docs/architecture.md)."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

from blobstore.metadata.repository import rows
from blobstore.metadata.repository.base import RepositoryBase
from blobstore.metadata.tables import upload_chunks, upload_tails
from blobstore.models import UploadTail


class TusTailRepository(RepositoryBase):
    """The tail row of each unfinished tus upload."""

    async def get_tail(self, upload_id: str) -> UploadTail | None:
        async with self._reader.connect() as conn:
            row = (
                await conn.execute(sa.select(upload_tails).where(upload_tails.c.upload_id == upload_id))
            ).first()
        if row is None:
            return None
        return rows.upload_tail(row._mapping)

    async def put_tail(
        self,
        upload_id: str,
        *,
        expected_end: int | None,
        offset: int,
        data: bytes,
        chunk_size: int,
        now: datetime,
    ) -> bool:
        """Store ``data`` as the tail starting at ``offset``, compare-and-set: True only when the stored tail
        still ends at ``expected_end`` (None: no tail stored yet) and no staged chunk starts at or past
        ``offset``. Every successful write moves the end forward, so of two writers that read the same tail
        only one can win.
        """
        first_free = offset // chunk_size
        async with self._engine.begin() as conn:
            overtaken = await conn.scalar(
                sa.select(
                    sa.exists().where(
                        upload_chunks.c.upload_id == upload_id, upload_chunks.c.index >= first_free
                    )
                )
            )
            if overtaken:
                return False
            values = {"offset": offset, "data": data, "updated_at": now}
            if expected_end is None:
                result = await conn.execute(
                    self._insert(upload_tails)
                    .values(upload_id=upload_id, **values)
                    .on_conflict_do_nothing(index_elements=["upload_id"])
                )
            else:
                result = await conn.execute(
                    sa.update(upload_tails)
                    .where(
                        upload_tails.c.upload_id == upload_id,
                        upload_tails.c.offset + sa.func.length(upload_tails.c.data) == expected_end,
                    )
                    .values(**values)
                )
        return result.rowcount == 1

    async def delete_tail(self, upload_id: str) -> None:
        async with self._engine.begin() as conn:
            await conn.execute(sa.delete(upload_tails).where(upload_tails.c.upload_id == upload_id))

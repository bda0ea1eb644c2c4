"""What the web console asks beyond the API: a filtered keyset listing, usage per namespace, open uploads."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

from blobstore.metadata.repository import rows
from blobstore.metadata.repository.base import OPEN_STATES, RepositoryBase, newest_first, visible
from blobstore.metadata.tables import artifacts, blobs, uploads
from blobstore.models import Artifact, ArtifactFilter, NamespaceUsage, UploadSession

PROXY_SOURCE = "proxy"
"""``metadata.source`` of what the MCP proxy stored instead of passing it into the model's context."""


def _like_escaped(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _is_hex(text: str) -> bool:
    return 0 < len(text) <= 64 and all(ch in "0123456789abcdef" for ch in text)


def _conditions(given: ArtifactFilter) -> list[sa.ColumnElement[bool]]:
    found: list[sa.ColumnElement[bool]] = []
    if given.mime:
        if "/" in given.mime:
            found.append(artifacts.c.mime_type == given.mime)
        else:
            found.append(artifacts.c.mime_type.like(f"{_like_escaped(given.mime)}/%", escape="\\"))
    if given.name_prefix:
        found.append(artifacts.c.name.like(f"{_like_escaped(given.name_prefix)}%", escape="\\"))
    if given.search:
        text = given.search
        by_name = artifacts.c.name.like(f"%{_like_escaped(text)}%", escape="\\")
        lowered = text.lower()
        found.append(sa.or_(by_name, artifacts.c.sha256.like(f"{lowered}%")) if _is_hex(lowered) else by_name)
    for key, value in (given.metadata or {}).items():
        found.append(artifacts.c.user_metadata[key].as_string() == value)
    return found


class BrowseRepository(RepositoryBase):
    async def browse_artifacts(
        self,
        namespace: str,
        *,
        now: datetime,
        limit: int,
        after: tuple[datetime, str] | None,
        where: ArtifactFilter,
    ) -> list[Artifact]:
        """A keyset page of the namespace's visible artifacts, newest first, narrowed by ``where``: the same
        order and cursor as :meth:`list_artifacts`, so a deep page costs what the first does."""
        query = sa.select(artifacts).where(
            artifacts.c.namespace == namespace, visible(now), *_conditions(where)
        )
        return [rows.artifact(row._mapping) for row in await self._all(newest_first(query, after, limit))]

    async def usage_by_namespace(self, *, now: datetime) -> list[NamespaceUsage]:
        """Artifacts and bytes of every namespace with a visible artifact, largest first."""
        live = visible(now)
        offloaded = sa.case(
            (artifacts.c.user_metadata["source"].as_string() == PROXY_SOURCE, artifacts.c.size), else_=0
        )
        totals = (
            sa.select(
                artifacts.c.namespace,
                sa.func.count().label("items"),
                sa.func.coalesce(sa.func.sum(artifacts.c.size), 0).label("bytes"),
                sa.func.coalesce(sa.func.sum(offloaded), 0).label("offloaded"),
            )
            .where(live)
            .group_by(artifacts.c.namespace)
        )
        held = sa.select(artifacts.c.namespace, artifacts.c.blob_id).where(live).distinct().subquery("held")
        stored = (
            sa.select(held.c.namespace, sa.func.coalesce(sa.func.sum(blobs.c.size), 0).label("stored"))
            .join(blobs, blobs.c.id == held.c.blob_id)
            .group_by(held.c.namespace)
        )
        stored_by = {row.namespace: int(row.stored) for row in await self._all(stored)}
        found = [
            NamespaceUsage(
                namespace=row.namespace,
                artifacts=int(row.items),
                bytes=int(row.bytes),
                bytes_stored=stored_by.get(row.namespace, 0),
                bytes_offloaded=int(row.offloaded),
            )
            for row in await self._all(totals)
        ]
        return sorted(found, key=lambda usage: (-usage.bytes, usage.namespace))

    async def list_open_uploads(self, *, limit: int = 100) -> list[UploadSession]:
        """Open and completing uploads of every namespace, newest first."""
        query = (
            sa.select(uploads)
            .where(uploads.c.state.in_(OPEN_STATES))
            .order_by(uploads.c.created_at.desc(), uploads.c.id.desc())
            .limit(limit)
        )
        return [rows.upload(row._mapping) for row in await self._all(query)]

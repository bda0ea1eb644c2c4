"""Attaching a new reference (an artifact, a rendition) to the live blob of some content, inside the
referencing row's transaction: deduplicate onto the live blob when there is one, else record the new
generation as that content's live blob."""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.dml import ReturningInsert

from blobstore.errors import Conflict, ContentNotLive
from blobstore.metadata.repository import rows
from blobstore.metadata.repository.base import LIVE
from blobstore.metadata.tables import blobs
from blobstore.models import BlobInfo, BlobRecord

_ATTEMPTS = 3


def attach_blob(
    conn: sa.Connection,
    blob: BlobInfo,
    *,
    created_at: datetime,
    dedup_only: bool = False,
) -> tuple[BlobRecord, bool]:
    """The live blob row of ``blob``'s content for a reference the caller inserts in this transaction, and
    whether it is an existing one (then the caller deletes its own new generation).

    The live blob is read ``FOR SHARE`` on PostgreSQL, which a GC claim's ``FOR UPDATE`` conflicts with, so
    a blob cannot be tombstoned between the dedup decision and the new reference; a blob a claim already
    locked is seen as tombstoned once the claim commits, and the content gets a new blob row. SQLite gets the
    same guarantee from ``BEGIN IMMEDIATE``. With ``dedup_only`` (the generation was not kept) only an
    existing live blob will do: :class:`ContentNotLive` when there is none.
    """
    same_content = {"content_sha256": blob.sha256, "content_size": blob.size}
    # SQLite's writer holds the database's only write lock since BEGIN IMMEDIATE, so nothing can mark or
    # claim the blob between reading it and clearing its mark: the UPDATE runs only when there is a mark,
    # and a commit of new content (no live blob) costs one statement fewer.
    mark_first = conn.dialect.name != "sqlite"
    for _ in range(_ATTEMPTS):
        if mark_first:
            # Clear a pending GC mark first, by an exclusive row lock taken only when there is a mark:
            # taking FOR SHARE first and then updating would deadlock two commits of the same content.
            conn.execute(_clear_gc_mark(), same_content)
        found = conn.execute(_live_blob_for_share(), same_content).first()
        if found is not None:
            if not mark_first and found.unreferenced_since is not None:
                conn.execute(_clear_gc_mark(), same_content)
            return rows.blob_record(found._mapping), True
        if dedup_only:
            # Raised inside the transaction (or its savepoint), so that the caller's other changes roll back.
            raise ContentNotLive()
        inserted = conn.execute(
            _insert_live_blob(conn.dialect.name),
            {
                "sha256": blob.sha256,
                "storage_key": blob.key,
                "size": blob.size,
                # The columns keep their first names: they hold the integrity blocks.
                "chunk_size": blob.block_size,
                "chunk_xxh3": ",".join(blob.block_xxh3),
                "state": LIVE,
                "created_at": created_at,
            },
        ).first()
        if inserted is not None:
            return rows.blob_record(inserted._mapping), False
        # Another transaction committed a live blob with this digest after our SELECT; dedup onto it.
    # Raised inside the transaction (or its savepoint), so that it rolls back (the caller's changes too).
    raise Conflict("concurrent commits of the same content kept conflicting; retry")


# Built once like the content lookup: per commit only their parameters change.
def _live_content() -> tuple[sa.ColumnElement[bool], ...]:
    return (
        blobs.c.sha256 == sa.bindparam("content_sha256"),
        blobs.c.size == sa.bindparam("content_size"),
        blobs.c.state == LIVE,
    )


@functools.cache
def _clear_gc_mark() -> sa.Update:
    return (
        sa.update(blobs)
        .where(*_live_content(), blobs.c.unreferenced_since.is_not(None))
        .values(unreferenced_since=None)
    )


@functools.cache
def _live_blob_for_share() -> sa.Select[Any]:
    return sa.select(blobs).where(*_live_content()).with_for_update(read=True)


@functools.cache
def _insert_live_blob(dialect: str) -> ReturningInsert[Any]:
    """The INSERT of a new live blob row, its values bound per commit: building ``values()`` and the
    conflict clause anew for every commit cost more than the statement's execution."""
    insert = postgresql.insert(blobs) if dialect == "postgresql" else sqlite.insert(blobs)
    # A literal predicate: a bound parameter stops matching the partial index once PostgreSQL switches the
    # prepared statement to a generic plan (6th execution).
    return insert.on_conflict_do_nothing(
        index_elements=["sha256"], index_where=sa.text(f"state = '{LIVE}'")
    ).returning(*blobs.c)

"""Rows to value types: the one place each table's columns are read back into a ``blobstore.models`` type."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from blobstore.models import (
    Artifact,
    BlobInfo,
    BlobRecord,
    BlockDigests,
    ChunkRecord,
    ConsoleSessionRecord,
    Rendition,
    Scope,
    TokenRecord,
    UploadSession,
    UploadState,
    UploadTail,
)


def blob_record(row: Mapping[Any, Any]) -> BlobRecord:
    # The columns keep their first names: they hold the integrity blocks.
    block_text: str = row["chunk_xxh3"]
    return BlobRecord(
        id=int(row["id"]),
        info=BlobInfo(
            key=row["storage_key"],
            size=int(row["size"]),
            sha256=row["sha256"],
            block_size=int(row["chunk_size"]),
            block_xxh3=BlockDigests.parse(block_text) if block_text else (),
        ),
        state=row["state"],
        created_at=row["created_at"],
    )


def artifact(row: Mapping[Any, Any]) -> Artifact:
    return Artifact(
        id=row["id"],
        namespace=row["namespace"],
        name=row["name"],
        mime_type=row["mime_type"],
        size=int(row["size"]),
        sha256=row["sha256"],
        blob_id=int(row["blob_id"]),
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        pinned=bool(row["pinned"]),
        metadata=dict(row["user_metadata"]),
        media=dict(row["media"]),
    )


def upload(row: Mapping[Any, Any]) -> UploadSession:
    return UploadSession(
        id=row["id"],
        namespace=row["namespace"],
        name=row["name"],
        mime_type=row["mime_type"],
        declared_size=row["declared_size"],
        declared_sha256=row["declared_sha256"],
        chunk_size=int(row["chunk_size"]),
        staging_ref=row["staging_ref"],
        state=UploadState(row["state"]),
        ttl_seconds=row["ttl_seconds"],
        metadata=dict(row["user_metadata"]),
        protocol=row["protocol"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        expires_at=row["expires_at"],
        artifact_id=row["artifact_id"],
        completion_owner=row["completion_owner"],
        completion_lease_until=row["completion_lease_until"],
    )


def chunk(row: Mapping[Any, Any]) -> ChunkRecord:
    return ChunkRecord(
        upload_id=row["upload_id"],
        index=int(row["index"]),
        size=int(row["size"]),
        sha256=row["sha256"],
        xxh3=row["xxh3"],
        received_at=row["received_at"],
    )


def token(row: Mapping[Any, Any]) -> TokenRecord:
    scopes_text: str = row["scopes"]
    return TokenRecord(
        id=row["id"],
        namespace=row["namespace"],
        scopes=frozenset(Scope(value) for value in scopes_text.split(",") if value),
        description=row["description"],
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        revoked_at=row["revoked_at"],
    )


def console_session(row: Mapping[Any, Any]) -> ConsoleSessionRecord:
    """A session row joined with its token's columns (``token__<name>``; all null in local mode)."""
    token_row = None
    if row["token_id"] is not None:
        token_row = token({column: row[f"token__{column}"] for column in _TOKEN_COLUMNS})
    flash = row["flash"]
    return ConsoleSessionRecord(
        id_hash=row["id_hash"],
        token=token_row,
        csrf=row["csrf"],
        created_at=row["created_at"],
        idle_until=row["idle_until"],
        expires_at=row["expires_at"],
        flash=dict(flash) if flash is not None else None,
    )


_TOKEN_COLUMNS = ("id", "namespace", "scopes", "description", "created_at", "expires_at", "revoked_at")


def scopes_text(scopes: frozenset[Scope]) -> str:
    """The ``tokens.scopes`` column value: scope names, sorted, comma-separated."""
    return ",".join(sorted(scope.value for scope in scopes))


def upload_tail(row: Mapping[Any, Any]) -> UploadTail:
    return UploadTail(
        upload_id=row["upload_id"],
        offset=int(row["offset"]),
        data=bytes(row["data"]),
        updated_at=row["updated_at"],
    )


def rendition(row: Mapping[Any, Any], blob: BlobRecord) -> Rendition:
    return Rendition(
        key=row["key"],
        source_sha256=row["source_sha256"],
        blob=blob,
        mime_type=row["mime_type"],
        meta=dict(row["meta"]),
        size=int(row["size"]),
        created_at=row["created_at"],
        expires_at=row["expires_at"],
    )

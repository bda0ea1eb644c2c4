"""Initial schema: blobs, artifacts, uploads, upload_chunks, tokens, audit_events.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None

# Spelled out rather than imported from the application, so this revision keeps creating the same schema
# whatever later code looks like.
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Timestamp = sa.DateTime(timezone=True)
LIVE = sa.text("state = 'live'")


def upgrade() -> None:
    op.create_table(
        "blobs",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("storage_key", sa.String(length=512), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("chunk_size", sa.Integer(), nullable=False),
        sa.Column("chunk_xxh3", sa.Text(), nullable=False),
        sa.Column("state", sa.String(length=16), server_default="live", nullable=False),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("unreferenced_since", Timestamp, nullable=True),
        sa.Column("tombstoned_at", Timestamp, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_blobs"),
        sa.UniqueConstraint("storage_key", name="uq_blobs_storage_key"),
    )
    op.create_index("ix_blobs_state_unreferenced_since", "blobs", ["state", "unreferenced_since"])
    op.create_index(
        "uq_blobs_sha256_live", "blobs", ["sha256"], unique=True, postgresql_where=LIVE, sqlite_where=LIVE
    )

    op.create_table(
        "artifacts",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("namespace", sa.String(length=128), nullable=False),
        sa.Column("name", sa.String(length=1024), nullable=False),
        sa.Column("mime_type", sa.String(length=255), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("blob_id", BigId, nullable=False),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("expires_at", Timestamp, nullable=True),
        sa.Column("pinned", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("user_metadata", sa.JSON(), nullable=False),
        sa.Column("media", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["blob_id"], ["blobs.id"], name="fk_artifacts_blob_id_blobs"),
        sa.PrimaryKeyConstraint("id", name="pk_artifacts"),
    )
    op.create_index("ix_artifacts_namespace_created_at_id", "artifacts", ["namespace", "created_at", "id"])
    op.create_index("ix_artifacts_blob_id", "artifacts", ["blob_id"])
    op.create_index("ix_artifacts_expires_at", "artifacts", ["expires_at"])

    op.create_table(
        "uploads",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("namespace", sa.String(length=128), nullable=False),
        sa.Column("name", sa.String(length=1024), nullable=False),
        sa.Column("mime_type", sa.String(length=255), nullable=True),
        sa.Column("declared_size", sa.BigInteger(), nullable=True),
        sa.Column("declared_sha256", sa.String(length=64), nullable=True),
        sa.Column("chunk_size", sa.Integer(), nullable=False),
        sa.Column("staging_ref", sa.Text(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("ttl_seconds", sa.Integer(), nullable=True),
        sa.Column("user_metadata", sa.JSON(), nullable=False),
        sa.Column("protocol", sa.String(length=16), server_default="native", nullable=False),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("updated_at", Timestamp, nullable=False),
        sa.Column("expires_at", Timestamp, nullable=False),
        sa.Column("artifact_id", sa.String(length=64), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_uploads"),
    )
    op.create_index("ix_uploads_namespace_state", "uploads", ["namespace", "state"])
    op.create_index("ix_uploads_state_expires_at", "uploads", ["state", "expires_at"])

    op.create_table(
        "upload_chunks",
        sa.Column("upload_id", sa.String(length=64), nullable=False),
        sa.Column("index", sa.Integer(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("xxh3", sa.String(length=32), nullable=False),
        sa.Column("received_at", Timestamp, nullable=False),
        sa.ForeignKeyConstraint(
            ["upload_id"], ["uploads.id"], name="fk_upload_chunks_upload_id_uploads", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("upload_id", "index", name="pk_upload_chunks"),
    )

    op.create_table(
        "tokens",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("namespace", sa.String(length=128), nullable=False),
        sa.Column("scopes", sa.String(length=64), nullable=False),
        sa.Column("secret_hash", sa.String(length=64), nullable=False),
        sa.Column("description", sa.String(length=255), nullable=True),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("expires_at", Timestamp, nullable=True),
        sa.Column("revoked_at", Timestamp, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_tokens"),
        sa.UniqueConstraint("secret_hash", name="uq_tokens_secret_hash"),
    )

    op.create_table(
        "audit_events",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("time", Timestamp, nullable=False),
        sa.Column("actor", sa.String(length=64), nullable=False),
        sa.Column("namespace", sa.String(length=128), nullable=True),
        sa.Column("action", sa.String(length=32), nullable=False),
        sa.Column("artifact_id", sa.String(length=64), nullable=True),
        sa.Column("size", sa.BigInteger(), nullable=True),
        sa.Column("mime_type", sa.String(length=255), nullable=True),
        sa.Column("duration_ms", sa.Integer(), nullable=True),
        sa.Column("result", sa.String(length=32), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_audit_events"),
    )
    op.create_index("ix_audit_events_time", "audit_events", ["time"])


def downgrade() -> None:
    op.drop_table("audit_events")
    op.drop_table("tokens")
    op.drop_table("upload_chunks")
    op.drop_table("uploads")
    op.drop_table("artifacts")
    op.drop_table("blobs")

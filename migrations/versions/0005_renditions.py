"""Renditions: media views stored as blobs, keyed by their source's content, parameters and renderer version.

A rendition references its blob like an artifact does, so the blob sweep keeps it; cleanup deletes a rendition
past its expiry or once no live artifact has its source content, which it finds by ``artifacts.sha256``.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None

# Spelled out rather than imported from the application, like 0001.
Timestamp = sa.DateTime(timezone=True)
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "renditions",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("source_sha256", sa.String(length=64), nullable=False),
        sa.Column("blob_id", BigId, nullable=False),
        sa.Column("mime_type", sa.String(length=255), nullable=False),
        sa.Column("meta", sa.JSON(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("expires_at", Timestamp, nullable=True),
        sa.ForeignKeyConstraint(["blob_id"], ["blobs.id"], name="fk_renditions_blob_id_blobs"),
        sa.PrimaryKeyConstraint("key", name="pk_renditions"),
    )
    op.create_index("ix_renditions_blob_id", "renditions", ["blob_id"])
    op.create_index("ix_renditions_source_sha256", "renditions", ["source_sha256"])
    op.create_index("ix_renditions_expires_at", "renditions", ["expires_at"])
    op.create_index("ix_artifacts_sha256", "artifacts", ["sha256"])


def downgrade() -> None:
    op.drop_index("ix_artifacts_sha256", table_name="artifacts")
    op.drop_index("ix_renditions_expires_at", table_name="renditions")
    op.drop_index("ix_renditions_source_sha256", table_name="renditions")
    op.drop_index("ix_renditions_blob_id", table_name="renditions")
    op.drop_table("renditions")

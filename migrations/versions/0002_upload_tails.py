"""Tails of tus uploads: the bytes past the last full staged chunk.

Revision ID: 0002
Revises: 0001
Create Date: 2025-01-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None

# Spelled out rather than imported from the application, like 0001.
Timestamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "upload_tails",
        sa.Column("upload_id", sa.String(length=64), nullable=False),
        sa.Column("offset", sa.BigInteger(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("updated_at", Timestamp, nullable=False),
        sa.ForeignKeyConstraint(
            ["upload_id"], ["uploads.id"], name="fk_upload_tails_upload_id_uploads", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("upload_id", name="pk_upload_tails"),
    )


def downgrade() -> None:
    op.drop_table("upload_tails")

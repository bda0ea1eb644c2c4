"""Drop ``audit_events``: the audit trail is written as JSON lines (``blobstore.audit``), never to this table.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision: str | None = "0003"
branch_labels: str | None = None
depends_on: str | None = None

# Spelled out rather than imported from the application, like 0001.
Timestamp = sa.DateTime(timezone=True)
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.drop_index("ix_audit_events_time", table_name="audit_events")
    op.drop_table("audit_events")


def downgrade() -> None:
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

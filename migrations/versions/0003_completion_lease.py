"""Completion lease of upload sessions: owner and expiry of a running completion.

A completion renews its lease while it joins the chunks; one whose lease ran out was abandoned (its process
died) and goes back to ``open``. Rows left ``completing`` by an older version have no lease and count as
abandoned.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None

# Spelled out rather than imported from the application, like 0001.
Timestamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.add_column("uploads", sa.Column("completion_owner", sa.String(length=64), nullable=True))
    op.add_column("uploads", sa.Column("completion_lease_until", Timestamp, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("uploads") as batch:
        batch.drop_column("completion_lease_until")
        batch.drop_column("completion_owner")

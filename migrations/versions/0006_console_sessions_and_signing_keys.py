"""Console sessions and signing keys in the metadata database, so that replicas share both.

``console_sessions``: a console login, keyed by the SHA-256 of the random id its cookie carries, naming the
token it acts as (deleted with it), with its CSRF token, idle and absolute ends, and the outcome of its last
change. ``signing_keys``: keys every replica must agree on (the share links' key), made once by the first
replica that needs one.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision: str | None = "0005"
branch_labels: str | None = None
depends_on: str | None = None

# Spelled out rather than imported from the application, like 0001.
Timestamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "console_sessions",
        sa.Column("id_hash", sa.String(length=64), nullable=False),
        sa.Column("token_id", sa.String(length=32), nullable=True),
        sa.Column("csrf", sa.String(length=64), nullable=False),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("idle_until", Timestamp, nullable=False),
        sa.Column("expires_at", Timestamp, nullable=False),
        sa.Column("flash", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(
            ["token_id"], ["tokens.id"], name="fk_console_sessions_token_id_tokens", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id_hash", name="pk_console_sessions"),
    )
    op.create_index("ix_console_sessions_token_id", "console_sessions", ["token_id"])
    op.create_index("ix_console_sessions_idle_until", "console_sessions", ["idle_until"])
    op.create_table(
        "signing_keys",
        sa.Column("purpose", sa.String(length=32), nullable=False),
        sa.Column("secret", sa.String(length=128), nullable=False),
        sa.Column("updated_at", Timestamp, nullable=False),
        sa.PrimaryKeyConstraint("purpose", name="pk_signing_keys"),
    )


def downgrade() -> None:
    op.drop_table("signing_keys")
    op.drop_index("ix_console_sessions_idle_until", table_name="console_sessions")
    op.drop_index("ix_console_sessions_token_id", table_name="console_sessions")
    op.drop_table("console_sessions")

"""SQLAlchemy Core tables; the Alembic migrations in ``migrations/`` create exactly these
(checked by a test).

Times are timezone-aware UTC. Digests are lower-case hex without the ``sha256:`` prefix. Artifacts reference
blobs through ``artifacts.blob_id``; there is no reference-count column (a hot row under dedup), so "is this
blob referenced" is an indexed ``EXISTS`` query.
"""

from __future__ import annotations

import sqlalchemy as sa

from blobstore.metadata.types import UTCDateTime

metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

Timestamp = UTCDateTime()
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
"""SQLite only auto-increments an ``INTEGER PRIMARY KEY``."""

blobs = sa.Table(
    "blobs",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("sha256", sa.String(64), nullable=False),
    sa.Column("storage_key", sa.String(512), nullable=False, unique=True),
    sa.Column("size", sa.BigInteger(), nullable=False),
    sa.Column("chunk_size", sa.Integer(), nullable=False),
    sa.Column("chunk_xxh3", sa.Text(), nullable=False),
    # live → tombstoned (a sweep claimed it; no new reference may attach) → row deleted after the object is.
    sa.Column("state", sa.String(16), nullable=False, server_default="live"),
    sa.Column("created_at", Timestamp, nullable=False),
    sa.Column("unreferenced_since", Timestamp, nullable=True),
    sa.Column("tombstoned_at", Timestamp, nullable=True),
    # At most one live generation per content: two replicas committing the same new content at once cannot
    # both insert one; the loser dedups onto the winner's row.
    sa.Index(
        "uq_blobs_sha256_live",
        "sha256",
        unique=True,
        postgresql_where=sa.text("state = 'live'"),
        sqlite_where=sa.text("state = 'live'"),
    ),
    sa.Index(None, "state", "unreferenced_since"),
)

artifacts = sa.Table(
    "artifacts",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("namespace", sa.String(128), nullable=False),
    sa.Column("name", sa.String(1024), nullable=False),
    sa.Column("mime_type", sa.String(255), nullable=False),
    sa.Column("size", sa.BigInteger(), nullable=False),
    sa.Column("sha256", sa.String(64), nullable=False),
    sa.Column("blob_id", BigId, sa.ForeignKey("blobs.id"), nullable=False),
    sa.Column("created_at", Timestamp, nullable=False),
    sa.Column("expires_at", Timestamp, nullable=True),
    sa.Column("pinned", sa.Boolean(), nullable=False, server_default=sa.false()),
    sa.Column("user_metadata", sa.JSON(), nullable=False),
    sa.Column("media", sa.JSON(), nullable=False),
    sa.Index(None, "namespace", "created_at", "id"),
    sa.Index(None, "blob_id"),
    sa.Index(None, "expires_at"),
    # Whether a rendition's source still lives: cleanup asks for live artifacts by content.
    sa.Index(None, "sha256"),
)

# Renditions (media views): products derived from a source's content, keyed by ``sha256(source sha256 +
# parameters + renderer version)`` and stored as ordinary blobs, so they dedup like artifacts and replicas
# share them. A rendition references its blob like an artifact does (``blob_id``), so the blob sweep never
# takes a blob a rendition uses. ``expires_at`` is the latest expiry of the artifacts it was made for (null:
# a source that never expires); cleanup deletes it past that, or once no live artifact has its source.
renditions = sa.Table(
    "renditions",
    metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("source_sha256", sa.String(64), nullable=False),
    sa.Column("blob_id", BigId, sa.ForeignKey("blobs.id"), nullable=False),
    sa.Column("mime_type", sa.String(255), nullable=False),
    sa.Column("meta", sa.JSON(), nullable=False),
    sa.Column("size", sa.BigInteger(), nullable=False),
    sa.Column("created_at", Timestamp, nullable=False),
    sa.Column("expires_at", Timestamp, nullable=True),
    sa.Index(None, "blob_id"),
    sa.Index(None, "source_sha256"),
    sa.Index(None, "expires_at"),
)

uploads = sa.Table(
    "uploads",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("namespace", sa.String(128), nullable=False),
    sa.Column("name", sa.String(1024), nullable=False),
    sa.Column("mime_type", sa.String(255), nullable=True),
    sa.Column("declared_size", sa.BigInteger(), nullable=True),
    sa.Column("declared_sha256", sa.String(64), nullable=True),
    sa.Column("chunk_size", sa.Integer(), nullable=False),
    sa.Column("staging_ref", sa.Text(), nullable=False),
    # open → completing → completed | aborted | expired
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("ttl_seconds", sa.Integer(), nullable=True),
    sa.Column("user_metadata", sa.JSON(), nullable=False),
    sa.Column("protocol", sa.String(16), nullable=False, server_default="native"),
    sa.Column("created_at", Timestamp, nullable=False),
    sa.Column("updated_at", Timestamp, nullable=False),
    sa.Column("expires_at", Timestamp, nullable=False),
    sa.Column("artifact_id", sa.String(64), nullable=True),
    # The completion lease: who joins the chunks while the upload is ``completing``, and until when. The
    # owner renews it while it works; a completion whose lease ran out was abandoned (its process died) and
    # is rolled back to ``open`` by the next request or cleanup run (``blobstore.upload_sessions``).
    sa.Column("completion_owner", sa.String(64), nullable=True),
    sa.Column("completion_lease_until", Timestamp, nullable=True),
    sa.Index(None, "namespace", "state"),
    sa.Index(None, "state", "expires_at"),
)

upload_chunks = sa.Table(
    "upload_chunks",
    metadata,
    sa.Column("upload_id", sa.String(64), sa.ForeignKey("uploads.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("index", sa.Integer(), primary_key=True),
    sa.Column("size", sa.BigInteger(), nullable=False),
    sa.Column("sha256", sa.String(64), nullable=False),
    sa.Column("xxh3", sa.String(32), nullable=False),
    sa.Column("received_at", Timestamp, nullable=False),
)

tokens = sa.Table(
    "tokens",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("namespace", sa.String(128), nullable=False),
    sa.Column("scopes", sa.String(64), nullable=False),
    sa.Column("secret_hash", sa.String(64), nullable=False, unique=True),
    sa.Column("description", sa.String(255), nullable=True),
    sa.Column("created_at", Timestamp, nullable=False),
    sa.Column("expires_at", Timestamp, nullable=True),
    sa.Column("revoked_at", Timestamp, nullable=True),
)

# The bytes of a tus upload past its last full staged chunk (tus PATCHes arrive at any length, staged chunks
# must be whole). ``offset`` is where ``data`` starts; the row is stale, and ignored, once a staged chunk
# covers that offset.
upload_tails = sa.Table(
    "upload_tails",
    metadata,
    sa.Column("upload_id", sa.String(64), sa.ForeignKey("uploads.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("offset", sa.BigInteger(), nullable=False),
    sa.Column("data", sa.LargeBinary(), nullable=False),
    sa.Column("updated_at", Timestamp, nullable=False),
)

# Console logins (``blobstore.console_sessions``), shared by every replica: the cookie carries a random id
# whose SHA-256 is the key; the row names the token it acts as (null: local mode) and ends at ``idle_until``
# (moved on by use, at most once a minute, never past ``expires_at``: so it is always the end). Revoking a
# token deletes its sessions; a lookup joins the token and checks it is live, so an expired token's end at
# once too.
console_sessions = sa.Table(
    "console_sessions",
    metadata,
    sa.Column("id_hash", sa.String(64), primary_key=True),
    sa.Column("token_id", sa.String(32), sa.ForeignKey("tokens.id", ondelete="CASCADE"), nullable=True),
    sa.Column("csrf", sa.String(64), nullable=False),
    sa.Column("created_at", Timestamp, nullable=False),
    sa.Column("idle_until", Timestamp, nullable=False),
    sa.Column("expires_at", Timestamp, nullable=False),
    # The outcome of the session's last change, for the page its redirect lands on (shown once).
    sa.Column("flash", sa.JSON(), nullable=True),
    sa.Index(None, "token_id"),
    sa.Index(None, "idle_until"),
)

# Keys the replicas must agree on, made once by the first one that needs it (an insert that does nothing on
# conflict, then a read): ``links`` signs share links and upload targets (``blobstore.link_keys``).
signing_keys = sa.Table(
    "signing_keys",
    metadata,
    sa.Column("purpose", sa.String(32), primary_key=True),
    sa.Column("secret", sa.String(128), nullable=False),
    sa.Column("updated_at", Timestamp, nullable=False),
)

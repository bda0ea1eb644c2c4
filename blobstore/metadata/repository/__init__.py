"""The metadata repository: every SQL statement the service runs, on SQLite or PostgreSQL.

Built on SQLAlchemy 2 Core (async). SQLite (aiosqlite, WAL) serializes writers with ``BEGIN IMMEDIATE``;
PostgreSQL (asyncpg) uses row locks. Every query that touches artifacts or uploads is scoped by namespace.

One module per concern, each a class over the shared ``RepositoryBase`` (``base.py``);
:class:`MetadataRepository` is their composition, and what the runtime builds. Its consumers type it by the
few methods they use.
"""

from __future__ import annotations

from blobstore.metadata.repository.artifacts import ArtifactRepository
from blobstore.metadata.repository.blobs import BlobRepository
from blobstore.metadata.repository.browse import BrowseRepository
from blobstore.metadata.repository.collection import CollectionRepository
from blobstore.metadata.repository.console_sessions import ConsoleSessionRepository
from blobstore.metadata.repository.renditions import RenditionRepository
from blobstore.metadata.repository.signing_keys import SigningKeyRepository
from blobstore.metadata.repository.stats import StatsRepository
from blobstore.metadata.repository.tokens import TokenRepository
from blobstore.metadata.repository.tus_tails import TusTailRepository
from blobstore.metadata.repository.uploads import UploadRepository

__all__ = ["MetadataRepository"]


class MetadataRepository(
    ArtifactRepository,
    BlobRepository,
    UploadRepository,
    TusTailRepository,
    TokenRepository,
    CollectionRepository,
    StatsRepository,
    BrowseRepository,
    RenditionRepository,
    ConsoleSessionRepository,
    SigningKeyRepository,
):
    """Every metadata read and write of the service, over one :class:`~sqlalchemy.ext.asyncio.AsyncEngine`.

    Writes run in ``BEGIN IMMEDIATE`` transactions on SQLite (one writer at a time) and in read-committed
    transactions with explicit row locks on PostgreSQL. Reads on SQLite start deferred transactions, which in
    WAL mode never wait for a writer.
    """

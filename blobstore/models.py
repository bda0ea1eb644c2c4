"""Value types shared by the service, the storage backends, the metadata repository and the edges.

Every layer may import from here; this module imports from no other part of the project.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar, overload

ARTIFACT_URI_PREFIX = "blobstore://artifacts/"


def artifact_uri(artifact_id: str) -> str:
    """The one spelling of an artifact's URI, for every edge that names one."""
    return f"{ARTIFACT_URI_PREFIX}{artifact_id}"


T = TypeVar("T")


class _Unset:
    pass


UNSET: Any = _Unset()
"""Default of an optional change: "leave as it is", unlike None, which may be a value to set."""


class UploadState(enum.StrEnum):
    OPEN = "open"
    COMPLETING = "completing"
    COMPLETED = "completed"
    ABORTED = "aborted"
    EXPIRED = "expired"


class Scope(enum.StrEnum):
    READ = "read"
    WRITE = "write"
    ADMIN = "admin"


class BlockDigests(Sequence[str]):
    """The XXH3-128 of each integrity block, read on demand from the comma-joined text the metadata keeps.

    A range read needs the digests of the one or two blocks it touches; splitting the whole list (1,024 of
    them for 1 GiB, about 24 µs) cost more than the range's own XXH3 and grew with the artifact. Every digest
    is 32 hex digits, so digest ``i`` is at a fixed place in the text. Equal to any sequence of the same
    digests, a tuple included.
    """

    __slots__ = ("_count", "_text")

    WIDTH = 32

    def __init__(self, text: str) -> None:
        count = (len(text) + 1) // (self.WIDTH + 1) if text else 0
        step = self.WIDTH + 1
        if text and (len(text) != count * step - 1 or text[self.WIDTH :: step] != "," * (count - 1)):
            raise ValueError("block digests are not 32 hex digits each")
        self._text = text
        self._count = count

    @classmethod
    def parse(cls, text: str) -> Sequence[str]:
        """The digests in ``text``; an entry of another width (never written by this store) is split."""
        try:
            return cls(text)
        except ValueError:
            return tuple(text.split(","))

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[str, ...]: ...

    def __getitem__(self, index: int | slice) -> str | tuple[str, ...]:
        if isinstance(index, slice):
            return tuple(self)[index]
        if index < 0:
            index += self._count
        if not 0 <= index < self._count:
            raise IndexError("block index out of range")
        start = index * (self.WIDTH + 1)
        return self._text[start : start + self.WIDTH]

    def __iter__(self) -> Iterator[str]:
        return iter(self._text.split(",") if self._text else ())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, BlockDigests):
            return self._text == other._text
        if isinstance(other, Sequence) and not isinstance(other, str):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"BlockDigests({self._count} blocks)"


@dataclass(frozen=True, slots=True)
class BlobInfo:
    """What the metadata keeps about a stored object, and all a backend needs to read it back verified."""

    key: str
    size: int
    sha256: str
    """Lower-case hex SHA-256 of the whole object (no ``sha256:`` prefix)."""
    block_size: int
    """Bytes per integrity block (independent of the upload chunk size)."""
    block_xxh3: Sequence[str]
    """Lower-case hex XXH3-128 of each ``block_size`` slice; the last may cover fewer bytes (a tuple, or
    :class:`BlockDigests` when read back from the metadata)."""


@dataclass(frozen=True, slots=True)
class ChunkReceipt:
    """One staged upload chunk as received: its index, length and checksums (hex)."""

    index: int
    size: int
    sha256: str
    xxh3: str


@dataclass(frozen=True, slots=True)
class StoredObject:
    """A key found by listing the blob store (for orphan sweeps)."""

    key: str
    size: int
    modified: datetime


@dataclass(frozen=True, slots=True)
class StagingEntry:
    """A staging area found by listing the blob store (for leftover sweeps)."""

    staging_ref: str
    modified: datetime


@dataclass(frozen=True, slots=True)
class BlobRecord:
    """A ``blobs`` row: one stored generation."""

    id: int
    info: BlobInfo
    state: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Artifact:
    id: str
    namespace: str
    name: str
    mime_type: str
    size: int
    sha256: str
    blob_id: int
    created_at: datetime
    expires_at: datetime | None
    pinned: bool
    metadata: dict[str, Any] = field(default_factory=dict)
    media: dict[str, Any] = field(default_factory=dict)

    @property
    def uri(self) -> str:
        return artifact_uri(self.id)

    @property
    def digest(self) -> str:
        return f"sha256:{self.sha256}"


@dataclass(frozen=True, slots=True)
class NewArtifact:
    """An artifact to record over a blob: everything but what the blob row decides (size, digest, blob id)."""

    id: str
    namespace: str
    name: str
    mime_type: str
    created_at: datetime
    expires_at: datetime | None
    pinned: bool
    metadata: dict[str, Any]
    media: dict[str, Any]


@dataclass(frozen=True, slots=True)
class NewRendition:
    """A rendition (a media view) to record over a blob of its bytes."""

    key: str
    """``sha256(source sha256 + parameters + renderer version)``, hex."""
    source_sha256: str
    mime_type: str
    meta: dict[str, Any]
    created_at: datetime
    expires_at: datetime | None
    """The latest expiry of the artifacts it is made for; None while one of them never expires."""


@dataclass(frozen=True, slots=True)
class Rendition:
    """A ``renditions`` row with the blob that holds its bytes."""

    key: str
    source_sha256: str
    blob: BlobRecord
    mime_type: str
    meta: dict[str, Any]
    size: int
    created_at: datetime
    expires_at: datetime | None


@dataclass(frozen=True, slots=True)
class CommitResult:
    artifact: Artifact
    blob: BlobRecord
    deduplicated: bool
    """True when the artifact was attached to an existing live blob: the caller deletes its new generation."""


@dataclass(frozen=True, slots=True)
class UploadSession:
    id: str
    namespace: str
    name: str
    mime_type: str | None
    declared_size: int | None
    declared_sha256: str | None
    chunk_size: int
    staging_ref: str
    state: UploadState
    ttl_seconds: int | None
    metadata: dict[str, Any]
    protocol: str
    created_at: datetime
    updated_at: datetime
    expires_at: datetime
    artifact_id: str | None
    completion_owner: str | None = None
    """Set while ``completing``: the completer holding the completion lease."""
    completion_lease_until: datetime | None = None
    """Set while ``completing``: when the completion lease runs out unless its owner renews it."""


@dataclass(frozen=True, slots=True)
class CompletionClaim:
    """The upload a commit completes, and the completion lease owner it must still be held by."""

    upload_id: str
    owner: str


@dataclass(frozen=True, slots=True)
class ChunkRecord:
    upload_id: str
    index: int
    size: int
    sha256: str
    xxh3: str
    received_at: datetime


@dataclass(frozen=True, slots=True)
class UploadTail:
    """The bytes of a tus upload past its last full staged chunk, starting at ``offset``."""

    upload_id: str
    offset: int
    data: bytes
    updated_at: datetime

    @property
    def end(self) -> int:
        return self.offset + len(self.data)


@dataclass(frozen=True, slots=True)
class TokenRecord:
    id: str
    namespace: str
    scopes: frozenset[Scope]
    description: str | None
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    items: list[T]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is asking: the namespace every query is scoped to, an actor id for the audit log, its scopes, and
    when its authority ends (a token's expiry; None: never, or not a token)."""

    namespace: str
    actor: str = "local"
    scopes: frozenset[Scope] = frozenset({Scope.READ, Scope.WRITE, Scope.ADMIN})
    expires_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ConsoleSessionRecord:
    """A console login as the metadata database keeps it: the SHA-256 of its id (the cookie's value, which is
    stored nowhere), the token it acts as (None: local mode) with that token's row, its CSRF token, when it
    ends without use (``idle_until``) and at the latest (``expires_at``), and the outcome of its last change
    waiting for the page the change redirected to (``flash``)."""

    id_hash: str
    token: TokenRecord | None
    csrf: str
    created_at: datetime
    idle_until: datetime
    expires_at: datetime
    flash: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class UploadStatus:
    session: UploadSession
    chunks: list[ChunkRecord]
    received_bytes: int
    missing: list[int] | None
    """Indexes missing below the last known chunk; None when the size was not declared and no end is known."""


# -- the web console's listings -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ArtifactFilter:
    """Narrowing of a listing; every member optional, all given ones must hold."""

    mime: str | None = None
    """``image`` (a whole family) or ``image/png`` (exactly)."""
    name_prefix: str | None = None
    search: str | None = None
    """A part of the name, or the beginning of the SHA-256 (hex)."""
    metadata: Mapping[str, str] | None = None
    """Exact values of string members of the artifact's metadata (e.g. the proxy's ``upstream``, ``tool``)."""


@dataclass(frozen=True, slots=True)
class NamespaceUsage:
    namespace: str
    artifacts: int
    bytes: int
    bytes_stored: int
    """Bytes of the distinct blobs the namespace's artifacts hold: what dedup left of :attr:`bytes`."""
    bytes_offloaded: int
    """Bytes of what the MCP proxy kept out of the model's context (``metadata.source == "proxy"``)."""

    @property
    def bytes_deduplicated(self) -> int:
        return self.bytes - self.bytes_stored

"""Request and response bodies of the HTTP API, and the builders from service values to them.

The JSON shapes are a public contract (``docs/http-api.md``); the client and the transfer CLI depend on them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from blobstore.config import Settings
from blobstore.direct_uploads import DirectOffer, is_direct
from blobstore.links import resource_link
from blobstore.models import Artifact, UploadSession, UploadStatus


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _numbers_are_numbers(cls, data: Any) -> Any:
        # An integer member takes a JSON number only: lax mode would take true/false as 1/0 (Python's bool
        # is an int) and "6" as 6. Strict mode would refuse 6.0 too, which JSON Schema counts as an integer.
        if isinstance(data, dict):
            for name, field in cls.model_fields.items():
                value, types = data.get(name), get_args(field.annotation) or (field.annotation,)
                if isinstance(value, bool | str) and int in types:
                    raise ValueError(f"{name} must be an integer")
                if bool in types and value is not None and not isinstance(value, bool):
                    raise ValueError(f"{name} must be true or false")
        return data


class CreateUploadRequest(_Request):
    name: str
    mime_type: str | None = None
    size: int | None = Field(default=None, ge=0)
    sha256: str | None = None
    chunk_size: int | None = Field(default=None, gt=0)
    ttl_seconds: int | None = Field(default=None, gt=0)
    metadata: dict[str, Any] | None = None
    direct: bool = False
    """Ask for presigned part URLs (granted on S3 when the server enables them and size and sha256 are
    given)."""


class DirectPartsRequest(_Request):
    part_numbers: list[int] | None = Field(default=None, min_length=1, max_length=1000)
    """1-based S3 part numbers; default: the first 1000 parts."""


class PartETagIn(_Request):
    part_number: int = Field(ge=1, le=10_000)
    etag: str = Field(min_length=1, max_length=128)


class CompleteUploadRequest(_Request):
    sha256: str | None = None
    parts: list[PartETagIn] | None = Field(default=None, max_length=10_000)
    """A direct upload's parts and the ETags the storage answered their PUTs with; used where the storage
    cannot list the parts itself."""


class UpdateArtifactRequest(_Request):
    """Only the members present change: ``ttl_seconds`` (``null`` = never expire) and ``pinned``."""

    ttl_seconds: int | None = Field(default=None, gt=0)
    pinned: bool | None = None


class ArtifactOut(BaseModel):
    id: str
    uri: str
    name: str
    mime_type: str
    size: int
    sha256: str
    created_at: datetime
    expires_at: datetime | None
    pinned: bool
    metadata: dict[str, Any]
    media: dict[str, Any]
    content_url: str
    resource_link: dict[str, Any]


class ArtifactPage(BaseModel):
    items: list[ArtifactOut]
    next_cursor: str | None


class UploadLimits(BaseModel):
    min_chunk_size: int
    max_chunk_size: int
    max_chunks: int
    max_artifact_size: int


class DirectPartOut(BaseModel):
    part_number: int
    size: int
    url: str


class DirectPartsOut(BaseModel):
    part_size: int
    part_count: int
    expires_at: datetime
    """When the URLs stop working; ask ``POST /v1/uploads/{upload_id}/parts`` for fresh ones."""
    parts: list[DirectPartOut]


class UploadOut(BaseModel):
    upload_id: str
    state: str
    name: str
    mime_type: str | None
    size: int | None
    sha256: str | None
    chunk_size: int
    chunk_count: int | None
    """Number of chunks the declared size needs; None when no size was declared."""
    created_at: datetime
    expires_at: datetime
    limits: UploadLimits
    direct: bool = False
    """The parts go straight to S3 through presigned URLs (``direct_parts``), not to the API."""
    direct_parts: DirectPartsOut | None = None
    """In the answer that begins a direct upload: the first part URLs."""
    direct_offered: bool | None = None
    """In the answer that begins an upload: whether this server grants direct uploads (to a create with
    ``direct: true``, a size and a sha256). A client that has not hashed its file yet learns here whether
    hashing it first would pay."""


class UploadStatusOut(UploadOut):
    chunks_received: list[int]
    bytes_received: int
    missing: list[int] | None
    """Chunk indexes still missing; None when no size was declared and no end is known yet."""
    artifact_id: str | None


class ChunkOut(BaseModel):
    upload_id: str
    index: int
    size: int
    sha256: str
    xxh3: str


def artifact_out(artifact: Artifact, base_url: str) -> ArtifactOut:
    return ArtifactOut(
        id=artifact.id,
        uri=artifact.uri,
        name=artifact.name,
        mime_type=artifact.mime_type,
        size=artifact.size,
        sha256=artifact.sha256,
        created_at=artifact.created_at,
        expires_at=artifact.expires_at,
        pinned=artifact.pinned,
        metadata=artifact.metadata,
        media=artifact.media,
        content_url=f"{base_url}/v1/artifacts/{artifact.id}/content",
        resource_link=resource_link(artifact),
    )


def upload_limits(settings: Settings) -> UploadLimits:
    return UploadLimits(
        min_chunk_size=settings.min_chunk_size,
        max_chunk_size=settings.max_chunk_size,
        max_chunks=settings.max_chunks_per_upload,
        max_artifact_size=settings.max_artifact_size,
    )


def _chunk_count(session: UploadSession) -> int | None:
    if session.declared_size is None:
        return None
    return -(-session.declared_size // session.chunk_size)


def upload_out(session: UploadSession, settings: Settings) -> UploadOut:
    return UploadOut(
        upload_id=session.id,
        state=session.state.value,
        name=session.name,
        mime_type=session.mime_type,
        size=session.declared_size,
        sha256=session.declared_sha256,
        chunk_size=session.chunk_size,
        chunk_count=_chunk_count(session),
        created_at=session.created_at,
        expires_at=session.expires_at,
        limits=upload_limits(settings),
        direct=is_direct(session),
    )


def direct_parts_out(offer: DirectOffer) -> DirectPartsOut:
    return DirectPartsOut(
        part_size=offer.part_size,
        part_count=offer.part_count,
        expires_at=offer.expires_at,
        parts=[DirectPartOut(part_number=p.number, size=p.size, url=p.url) for p in offer.parts],
    )


def upload_status_out(status: UploadStatus, settings: Settings) -> UploadStatusOut:
    base = upload_out(status.session, settings)
    return UploadStatusOut(
        **base.model_dump(),
        chunks_received=sorted(chunk.index for chunk in status.chunks),
        bytes_received=status.received_bytes,
        missing=status.missing,
        artifact_id=status.session.artifact_id,
    )

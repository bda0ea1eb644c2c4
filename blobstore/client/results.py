"""What the client hands back: artifacts, upload sessions and transfer results, parsed from the API's JSON."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

ProgressCallback = Callable[[int, int], None]
"""Called with ``(done_bytes, total_bytes)`` as a transfer advances; ``total_bytes`` is 0 while unknown."""


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


@dataclass(frozen=True, slots=True)
class ArtifactInfo:
    id: str
    uri: str
    name: str
    mime_type: str
    size: int
    sha256: str
    created_at: datetime | None
    expires_at: datetime | None
    metadata: dict[str, Any] = field(default_factory=dict)
    media: dict[str, Any] = field(default_factory=dict)
    resource_link: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def etag(self) -> str:
        return f'"sha256-{self.sha256}"'

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ArtifactInfo:
        sha = str(data.get("sha256", ""))
        return cls(
            id=str(data["id"]),
            uri=str(data.get("uri", "")),
            name=str(data.get("name", "")),
            mime_type=str(data.get("mime_type", "application/octet-stream")),
            size=int(data["size"]),
            sha256=sha.removeprefix("sha256:"),
            created_at=_time(data.get("created_at")),
            expires_at=_time(data.get("expires_at")),
            metadata=dict(data.get("metadata") or {}),
            media=dict(data.get("media") or {}),
            resource_link=dict(data.get("resource_link") or {}),
            raw=dict(data),
        )


@dataclass(frozen=True, slots=True)
class ArtifactPage:
    items: list[ArtifactInfo]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class UploadSessionInfo:
    """The answer to ``POST /v1/uploads``."""

    upload_id: str
    chunk_size: int
    expires_at: datetime | None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> UploadSessionInfo:
        return cls(
            upload_id=str(data["upload_id"]),
            chunk_size=int(data["chunk_size"]),
            expires_at=_time(data.get("expires_at")),
            raw=dict(data),
        )


@dataclass(frozen=True, slots=True)
class UploadStatusInfo:
    """The answer to ``GET /v1/uploads/{upload_id}``."""

    upload_id: str
    state: str
    chunk_size: int
    chunks_received: frozenset[int]
    bytes_received: int
    missing: list[int] | None
    expires_at: datetime | None
    artifact_id: str | None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> UploadStatusInfo:
        indexes = frozenset(int(index) for index in data.get("chunks_received") or ())
        missing = data.get("missing")
        return cls(
            upload_id=str(data["upload_id"]),
            state=str(data["state"]),
            chunk_size=int(data.get("chunk_size") or 0),
            chunks_received=indexes,
            bytes_received=int(data.get("bytes_received") or 0),
            missing=None if missing is None else [int(i) for i in missing],
            expires_at=_time(data.get("expires_at")),
            artifact_id=data.get("artifact_id"),
            raw=dict(data),
        )


@dataclass(frozen=True, slots=True)
class UploadResult:
    artifact: ArtifactInfo
    upload_id: str
    chunk_size: int
    chunks_sent: int
    chunks_skipped: int
    bytes_sent: int
    resumed: bool

    def summary(self) -> dict[str, Any]:
        return {
            "artifact": self.artifact.raw,
            "upload_id": self.upload_id,
            "chunk_size": self.chunk_size,
            "chunks_sent": self.chunks_sent,
            "chunks_skipped": self.chunks_skipped,
            "bytes_sent": self.bytes_sent,
            "resumed": self.resumed,
        }


@dataclass(frozen=True, slots=True)
class DownloadResult:
    artifact: ArtifactInfo
    path: Path
    start: int
    end: int
    bytes_received: int
    resumed_from: int
    verified: bool
    """True when the whole artifact was fetched and its SHA-256 checked."""

    def summary(self) -> dict[str, Any]:
        return {
            "id": self.artifact.id,
            "path": str(self.path),
            "start": self.start,
            "end": self.end,
            "bytes_received": self.bytes_received,
            "resumed_from": self.resumed_from,
            "sha256": self.artifact.sha256,
            "verified": self.verified,
        }

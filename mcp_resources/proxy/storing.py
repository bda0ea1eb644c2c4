"""Where offloaded payloads go: artifacts in the store, with provenance metadata and one audit line each."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from typing import Any, Final

from blobstore.audit import AuditLog
from blobstore.models import Artifact, Caller
from blobstore.validation import validate_metadata, validate_mime, validate_name
from mcp_resources.embed import EmbeddedStore
from mcp_resources.proxy.items import Call, Item
from mcp_resources.proxy.long_values import LongString, StagedPayload, json_parts, json_stream
from mcp_resources.results.content import resource_link_for

SOURCE: Final = "proxy"
GENERIC_TYPE: Final = "application/octet-stream"


def declared_type(mime_type: str) -> str | None:
    """The type to declare for a payload: none for the generic ``application/octet-stream``, so the store
    types it by its bytes (server-filesystem sends every file that is neither image nor audio so, and a PDF
    stored as octet-stream would get no page facts and no views)."""
    return None if mime_type == GENERIC_TYPE else mime_type


def canonical_digest(arguments: Mapping[str, Any] | None) -> str:
    """SHA-256 of the canonical JSON of the arguments: sorted keys, no spaces, UTF-8. A string argument too
    long to hold (read incrementally) counts as ``"sha256:<its SHA-256>"``."""

    def long(value: Any) -> str:
        if isinstance(value, LongString):
            return f"sha256:{value.sha256}"
        raise TypeError(f"{type(value).__name__} is not JSON serializable")

    text = json.dumps(
        arguments or {}, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=long
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class ArtifactWriter:
    """Stores an item's payload once per item, as the proxy's caller, and audits each offload."""

    def __init__(self, *, store: EmbeddedStore, caller: Caller, upstream_name: str, audit: AuditLog) -> None:
        self.store = store
        self.caller = caller
        self.upstream_name = upstream_name
        self.audit = audit

    @property
    def max_window(self) -> int:
        return self.store.resources.max_window

    def link(self, artifact: Artifact, *, description: str | None = None) -> dict[str, Any]:
        link = resource_link_for(artifact, description=description, max_window=self.max_window)
        dumped: dict[str, Any] = link.model_dump(by_alias=True, exclude_none=True, mode="json")
        return dumped

    def _metadata(self, call: Call) -> dict[str, Any]:
        return {
            "source": SOURCE,
            "upstream": self.upstream_name,
            "tool": call.tool,
            "arguments_sha256": call.arguments_sha256,
        }

    async def store_item(self, call: Call, item: Item) -> Artifact:
        if item.artifact is not None:
            return item.artifact
        started = time.monotonic()
        metadata = self._metadata(call)
        if item.staged is not None:
            artifact = await self._publish(
                item.staged, name=item.name, mime_type=item.mime_type, metadata=metadata
            )
        else:
            assert item.raw is not None
            artifact = await self.store.put_once(
                item.raw,
                name=item.name,
                mime_type=declared_type(item.mime_type),
                metadata=metadata,
                caller=self.caller,
            )
        item.artifact = artifact
        self._audit(call, artifact, started)
        return artifact

    async def store_json(self, call: Call, value: Any, *, name: str) -> Artifact:
        """A whole result as a JSON artifact, its long strings streamed from where they are."""
        started = time.monotonic()
        parts = json_parts(value)
        metadata = self._metadata(call)
        if len(parts) == 1 and isinstance(parts[0], bytes):
            artifact = await self.store.put_once(
                parts[0], name=name, mime_type="application/json", metadata=metadata, caller=self.caller
            )
        else:
            artifact = await self.store.put(
                json_stream(parts),
                name=name,
                mime_type="application/json",
                metadata=metadata,
                caller=self.caller,
            )
        self._audit(call, artifact, started)
        return artifact

    async def _publish(
        self, staged: StagedPayload, *, name: str, mime_type: str, metadata: dict[str, Any]
    ) -> Artifact:
        """The staged payload as an artifact: the caller's live one with the same bytes, name and metadata
        (its expiry extended), or a new one over the staged blob."""
        service = self.store.service
        blob = await staged.staged()
        wanted = validate_metadata(metadata)
        expires_at = service.expiry_for(None, service.clock())
        twin = await service.live_twin(
            self.caller, sha256=blob.sha256, size=blob.size, name=name, metadata=wanted, expires_at=expires_at
        )
        if twin is not None:
            return twin  # the staged blob is released with its message
        staged.published = True
        return await service.publish(
            self.caller,
            blob,
            name=validate_name(name),
            declared_mime=validate_mime(declared_type(mime_type)),
            expires_at=expires_at,
            metadata=wanted,
            head=bytes(staged.head),
        )

    def _audit(self, call: Call, artifact: Artifact, started: float) -> None:
        duration = (artifact.media or {}).get("duration_seconds")
        self.audit.record(
            actor=self.caller.actor,
            namespace=self.caller.namespace,
            action="offload",
            result="ok",
            artifact_id=artifact.id,
            size=artifact.size,
            mime_type=artifact.mime_type,
            duration_ms=int((time.monotonic() - started) * 1000),
            extra={
                "upstream": self.upstream_name,
                "tool": call.tool,
                "arguments_sha256": call.arguments_sha256,
                "sha256": artifact.sha256,
                "media_duration_seconds": duration if isinstance(duration, int | float) else None,
            },
        )

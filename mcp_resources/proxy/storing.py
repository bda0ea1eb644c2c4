"""Where offloaded payloads go: artifacts in the store, with provenance metadata and one audit line each."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from typing import Any, Final

from blobstore.audit import AuditLog
from blobstore.models import Artifact, Caller
from mcp_resources.content import resource_link_for
from mcp_resources.embed import EmbeddedStore
from mcp_resources.proxy.items import Call, Item

SOURCE: Final = "proxy"


def canonical_digest(arguments: Mapping[str, Any] | None) -> str:
    """SHA-256 of the canonical JSON of the arguments: sorted keys, no spaces, UTF-8."""
    text = json.dumps(arguments or {}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
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

    def link(self, artifact: Artifact) -> dict[str, Any]:
        link = resource_link_for(artifact, max_window=self.max_window)
        dumped: dict[str, Any] = link.model_dump(by_alias=True, exclude_none=True, mode="json")
        return dumped

    async def store_item(self, call: Call, item: Item) -> Artifact:
        if item.artifact is not None:
            return item.artifact
        assert item.raw is not None
        started = time.monotonic()
        metadata = {
            "source": SOURCE,
            "upstream": self.upstream_name,
            "tool": call.tool,
            "arguments_sha256": call.arguments_sha256,
        }
        artifact = await self.store.put_once(
            item.raw, name=item.name, mime_type=item.mime_type, metadata=metadata, caller=self.caller
        )
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
        item.artifact = artifact
        return artifact

"""The audit trail: one structured JSON line per action, never content, never a secret."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from datetime import UTC, datetime

from blobstore.metadata.repository import AuditEvent

logger = logging.getLogger("blobstore.audit")


class AuditLog:
    """Writes audit events as JSON lines to the ``blobstore.audit`` logger (and so to any handler configured)."""

    def record(
        self,
        *,
        actor: str,
        namespace: str | None,
        action: str,
        result: str,
        artifact_id: str | None = None,
        size: int | None = None,
        mime_type: str | None = None,
        duration_ms: int | None = None,
    ) -> AuditEvent:
        event = AuditEvent(
            time=datetime.now(UTC),
            actor=actor,
            namespace=namespace,
            action=action,
            result=result,
            artifact_id=artifact_id,
            size=size,
            mime_type=mime_type,
            duration_ms=duration_ms,
        )
        payload = asdict(event)
        payload["time"] = event.time.isoformat()
        logger.info(json.dumps(payload, separators=(",", ":"), sort_keys=True))
        return event

"""The audit trail: one structured JSON line per action, never content, never a secret.

Fields: ``time``, ``actor`` (a token id, ``local``, ``cli`` or ``anonymous`` -- never a secret),
``namespace``, ``action``, ``artifact_id``, ``size``, ``mime_type``, ``duration_ms``, ``result`` (``ok`` or an
error code), plus ``token_id`` for token changes and ``extra`` facts for an action (the proxy's ``offload``
adds ``tool``, ``arguments_sha256`` and the stored artifact's ``sha256``, which identify but do not reveal
content). Content, bodies and headers are never passed in, so they cannot appear; the only content digest
is that artifact SHA-256, which the store already exposes with every artifact.

With a file configured (``BLOBSTORE_AUDIT_LOG``) lines are appended there (mode 0600); otherwise they go to
the ``blobstore.audit`` logger, or straight to stderr when the process configured no logging at all, so an
audit line is never dropped for want of a handler.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Mapping
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from blobstore.errors import from_os_error
from blobstore.metadata.repository import AuditEvent

logger = logging.getLogger("blobstore.audit")
# Audit lines are not diagnostics: they are wanted at the default WARNING level of an unconfigured root.
logger.setLevel(logging.INFO)

FILE_MODE = 0o600


class AuditLog:
    """Writes audit events as JSON lines to ``path`` or to the ``blobstore.audit`` logger."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path

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
        token_id: str | None = None,
        extra: Mapping[str, str | int | float | None] | None = None,
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
        payload: dict[str, Any] = asdict(event)
        payload["time"] = event.time.isoformat()
        if token_id is not None:
            payload["token_id"] = token_id
        for key, value in (extra or {}).items():
            payload.setdefault(key, value)
        self._write(json.dumps(payload, separators=(",", ":"), sort_keys=True))
        return event

    def _write(self, line: str) -> None:
        if self.path is not None:
            # One O_APPEND write per line: concurrent writers (replicas, the CLI) never interleave inside a
            # line, and a rotated file is picked up at the next event.
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
                try:
                    os.write(fd, (line + "\n").encode())
                finally:
                    os.close(fd)
            except OSError as exc:
                # An action that cannot be audited fails, as a storage error without the path.
                raise from_os_error(exc) from None
        elif logger.hasHandlers():
            logger.info(line)
        else:
            sys.stderr.write(line + "\n")

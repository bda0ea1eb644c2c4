"""The audit trail: one structured JSON line per action, never content, never a secret.

Fields: ``time``, ``actor`` (a token id, ``local``, ``cli`` or ``anonymous`` -- never a secret),
``namespace``, ``action``, ``artifact_id``, ``size``, ``mime_type``, ``duration_ms``, ``result`` (``ok`` or an
error code), plus ``token_id`` for token changes and ``extra`` facts for an action (the proxy's ``offload``
adds ``tool``, ``arguments_sha256`` and the stored artifact's ``sha256``, which identify but do not reveal
content). Content, bodies and headers are never passed in, so they cannot appear; the only content digest
is that artifact SHA-256, which the store already exposes with every artifact.

The service writes them to a file, ``BLOBSTORE_AUDIT_LOG`` (default ``audit.jsonl`` in the data directory),
appended with mode 0600, so a terminal shows people what they asked for, not a JSON line per request;
``BLOBSTORE_AUDIT_LOG=-`` writes them to standard output instead (a container's log collector). An
``AuditLog`` without a path (a library user's service) writes to the ``blobstore.audit`` logger, or straight
to stderr when the process configured no logging at all, so an audit line is never dropped for want of a
handler.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from blobstore.errors import from_os_error
from blobstore.models import Artifact, Caller

logger = logging.getLogger("blobstore.audit")
# Audit lines are not diagnostics: they are wanted at the default WARNING level of an unconfigured root.
logger.setLevel(logging.INFO)

FILE_MODE = 0o600
STDOUT: Final = Path("-")
"""The ``audit_log`` value that means standard output."""


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """The fixed fields of one audit line."""

    time: datetime
    actor: str
    namespace: str | None
    action: str
    result: str
    artifact_id: str | None = None
    size: int | None = None
    mime_type: str | None = None
    duration_ms: int | None = None


_EVENT_FIELDS: Final = tuple(field.name for field in fields(AuditEvent))
_ENCODE: Final = json.JSONEncoder(separators=(",", ":"), sort_keys=True).encode
"""One encoder for every line: ``json.dumps`` with options builds a new encoder per call (a few % of a small
read's CPU), and the line's text depends only on these options."""


class AuditLog:
    """Writes audit events as JSON lines to ``path`` or to the ``blobstore.audit`` logger."""

    def __init__(self, path: Path | None = None, *, on_full: Callable[[], int] | None = None) -> None:
        self.path = path
        # Makes room on the audit file's file system (releases the disk reserve); the bytes it freed.
        self.on_full = on_full

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
        # The fields are flat values: a shallow copy, not asdict's deep copy (a few % of a small range read).
        payload: dict[str, Any] = {name: getattr(event, name) for name in _EVENT_FIELDS}
        payload["time"] = event.time.isoformat()
        if token_id is not None:
            payload["token_id"] = token_id
        for key, value in (extra or {}).items():
            payload.setdefault(key, value)
        self._write(_ENCODE(payload))
        return event

    def outcome(
        self,
        caller: Caller,
        action: str,
        result: str,
        started: float,
        *,
        artifact: Artifact | None = None,
        size: int | None = None,
    ) -> None:
        """Record how ``caller``'s action that began at ``started`` (:func:`time.monotonic`) ended."""
        self.record(
            actor=caller.actor,
            namespace=caller.namespace,
            action=action,
            result=result,
            artifact_id=artifact.id if artifact else None,
            size=size if size is not None else (artifact.size if artifact else None),
            mime_type=artifact.mime_type if artifact else None,
            duration_ms=int((time.monotonic() - started) * 1000),
        )

    def _write(self, line: str) -> None:
        if self.path == STDOUT:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
        elif self.path is not None:
            # One O_APPEND write per line: concurrent writers (replicas, the CLI) never interleave inside a
            # line, and a rotated file is picked up at the next event.
            try:
                self._append(self.path, line)
            except OSError as exc:
                # The deletes that free a full disk are audited too: let their line through on the reserve.
                if exc.errno == errno.ENOSPC and self.on_full is not None and self.on_full() > 0:
                    logger.warning("the audit log's disk is full: released the disk reserve")
                    try:
                        self._append(self.path, line)
                        return
                    except OSError as again:
                        raise from_os_error(again) from None
                # An action that cannot be audited fails, as a storage error without the path.
                raise from_os_error(exc) from None
        elif logger.hasHandlers():
            logger.info(line)
        else:
            sys.stderr.write(line + "\n")

    @staticmethod
    def _append(path: Path, line: str) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)

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
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

from blobstore.errors import from_os_error
from blobstore.log_times import iso_micros, now_micros
from blobstore.models import Artifact, Caller

logger = logging.getLogger("blobstore.audit")
# Audit lines are not diagnostics: they are wanted at the default WARNING level of an unconfigured root.
logger.setLevel(logging.INFO)

FILE_MODE = 0o600
STDOUT: Final = Path("-")
"""The ``audit_log`` value that means standard output."""


_ENCODE: Final = json.JSONEncoder(separators=(",", ":"), sort_keys=True).encode
"""One encoder for every line: ``json.dumps`` with options builds a new encoder per call (a few % of a small
read's CPU), and the line's text depends only on these options."""

_QUOTE: Final = json.encoder.encode_basestring_ascii
"""A JSON string literal, as :data:`_ENCODE` writes it (``ensure_ascii``, by its own C function)."""


def _value(value: object) -> str:
    """:data:`_ENCODE`'s text of a string, an integer or ``None``; TypeError for anything else."""
    if type(value) is str:
        return _QUOTE(value)
    if value is None:
        return "null"
    if type(value) is int:
        return int.__repr__(value)
    raise TypeError(type(value).__name__)


def _fixed_line(
    now: str,
    actor: str,
    namespace: str | None,
    action: str,
    result: str,
    artifact_id: str | None,
    size: int | None,
    mime_type: str | None,
    duration_ms: int | None,
) -> str:
    """:data:`_ENCODE`'s text of the fixed fields alone, byte for byte (its sorted keys, its separators),
    without its per-call setup: half the cost of a read's audit line."""
    return (
        f'{{"action":{_value(action)},"actor":{_value(actor)},"artifact_id":{_value(artifact_id)},'
        f'"duration_ms":{_value(duration_ms)},"mime_type":{_value(mime_type)},"namespace":{_value(namespace)},'
        f'"result":{_value(result)},"size":{_value(size)},"time":{_value(now)}}}'
    )


REOPEN_SECONDS: Final = 1.0
"""How long the audit file stays open between lines. Each line is still one ``O_APPEND`` write; a rotated
file (renamed away) gets at most this long of lines more, then the file at the configured path is opened
again (created if missing)."""


class AuditLog:
    """Writes audit events as JSON lines to ``path`` or to the ``blobstore.audit`` logger."""

    def __init__(self, path: Path | None = None, *, on_full: Callable[[], int] | None = None) -> None:
        self.path = path
        # Makes room on the audit file's file system (releases the disk reserve); the bytes it freed.
        self.on_full = on_full
        self._file = _AppendFile(path) if path is not None and path != STDOUT else None

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
    ) -> None:
        """One line: the fixed fields (``None`` where they do not apply), then ``token_id`` and ``extra``."""
        now = iso_micros(now_micros())
        if token_id is None and not extra:
            try:
                line = _fixed_line(
                    now, actor, namespace, action, result, artifact_id, size, mime_type, duration_ms
                )
            except TypeError:
                pass  # a value the encoder writes by its own rules: the line below
            else:
                self._write(line)
                return
        payload: dict[str, Any] = {
            "time": now,
            "actor": actor,
            "namespace": namespace,
            "action": action,
            "result": result,
            "artifact_id": artifact_id,
            "size": size,
            "mime_type": mime_type,
            "duration_ms": duration_ms,
        }
        if token_id is not None:
            payload["token_id"] = token_id
        if extra:
            for key, value in extra.items():
                payload.setdefault(key, value)
        self._write(_ENCODE(payload))

    def close(self) -> None:
        if self._file is not None:
            self._file.close()

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
        if self._file is not None:
            # One O_APPEND write per line: concurrent writers (replicas, the CLI) never interleave inside a
            # line, and a rotated file is picked up within REOPEN_SECONDS.
            data = (line + "\n").encode()
            try:
                self._file.append(data)
            except OSError as exc:
                # The deletes that free a full disk are audited too: let their line through on the reserve.
                if exc.errno == errno.ENOSPC and self.on_full is not None and self.on_full() > 0:
                    logger.warning("the audit log's disk is full: released the disk reserve")
                    try:
                        self._file.append(data)
                        return
                    except OSError as again:
                        raise from_os_error(again) from None
                # An action that cannot be audited fails, as a storage error without the path.
                raise from_os_error(exc) from None
        elif self.path == STDOUT:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
        elif logger.hasHandlers():
            logger.info(line)
        else:
            sys.stderr.write(line + "\n")


class _AppendFile:
    """The audit file, opened for appending and kept open for up to :data:`REOPEN_SECONDS` (an open and a
    close per line were a third of a small read's audit cost). Writes and reopens hold one lock, so a write
    never goes to a descriptor another thread closed (and the system gave to another file)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._opened_at = 0.0
        # Closes the descriptor when the log is dropped without close() (a one-off log of a CLI command).
        self._finalizer: weakref.finalize[[int], _AppendFile] | None = None

    def append(self, data: bytes) -> None:
        with self._lock:
            fd = self._fd
            if fd is None or time.monotonic() - self._opened_at >= REOPEN_SECONDS:
                fd = self._reopen()
            try:
                os.write(fd, data)
            except OSError:
                self._drop()  # a failed descriptor is not trusted with the next line
                raise

    def close(self) -> None:
        with self._lock:
            self._drop()

    def _reopen(self) -> int:
        self._drop()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
        self._fd, self._opened_at = fd, time.monotonic()
        self._finalizer = weakref.finalize(self, os.close, fd)
        return fd

    def _drop(self) -> None:
        if self._finalizer is not None:
            self._finalizer()  # closes the descriptor, once
        self._fd = self._finalizer = None

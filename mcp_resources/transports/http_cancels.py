"""``notifications/cancelled`` over stateless streamable HTTP in the handshake era.

The session manager is stateless: every POST gets a transport of its own, so a ``notifications/cancelled``
POSTed beside a running call reaches a transport that knows nothing of it, and the SDK acknowledges it and
drops it (a 2026-07-28 client instead closes the call's response stream, which the SDK itself turns into the
handler's cancellation). :class:`RunningCalls` remembers, per process, the calls (``tools/call``,
``resources/read``) in flight by their caller and JSON-RPC id, and a cancellation from the same caller ends
that call's HTTP exchange: the manager then tears the call's transport down, which cancels its handler, so a
view's decoder worker is killed and its slot freed as over stdio. A caller can cancel only its own calls
(same namespace and actor); bodies are parsed for this only when they are small and name one of those
methods, so an upload chunk is never parsed twice.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any, Final

import anyio

from blobstore.models import Caller

CANCELLABLE: Final = (b'"tools/call"', b'"resources/read"')
CANCELLED: Final = b'"notifications/cancelled"'
MAX_PARSED: Final = 64 * 1024
"""Bodies larger than this are never parsed for their id (a view call's body is a few hundred bytes)."""

_Key = tuple[str, str, str]


def _message(body: bytes | None, marks: tuple[bytes, ...]) -> dict[str, Any] | None:
    if body is None or len(body) > MAX_PARSED or not any(mark in body for mark in marks):
        return None
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return message if isinstance(message, dict) else None


def _key(caller: Caller, ident: Any) -> _Key | None:
    if not isinstance(ident, str | int) or isinstance(ident, bool):
        return None
    # "1" and 1 are different ids: the key keeps the JSON spelling.
    return (caller.namespace, caller.actor, json.dumps(ident))


class RunningCalls:
    def __init__(self) -> None:
        self._scopes: dict[_Key, anyio.CancelScope] = {}

    @contextlib.contextmanager
    def running(self, caller: Caller, body: bytes | None) -> Iterator[None]:
        """The block that answers ``body``; cancelled when its caller cancels it (if it is a call)."""
        message = _message(body, CANCELLABLE)
        key = _key(caller, message.get("id")) if message is not None else None
        if key is None:
            yield
            return
        with anyio.CancelScope() as scope:
            self._scopes[key] = scope
            try:
                yield
            finally:
                if self._scopes.get(key) is scope:
                    del self._scopes[key]

    def cancel(self, caller: Caller, body: bytes | None) -> None:
        """When ``body`` is a ``notifications/cancelled`` of a call of ``caller`` in flight here: end it."""
        message = _message(body, (CANCELLED,))
        if message is None or message.get("method") != "notifications/cancelled":
            return
        params = message.get("params")
        key = _key(caller, params.get("requestId")) if isinstance(params, dict) else None
        scope = self._scopes.get(key) if key is not None else None
        if scope is not None:
            scope.cancel()

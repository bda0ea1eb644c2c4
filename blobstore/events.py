"""Artifact change notifications inside one process.

The service announces deletions and cleanup announces expiries here; edges that push changes to their
clients (the MCP server's ``notifications/resources/updated`` and ``list_changed``) subscribe. Events are sent
after the change is committed, so a listener never hears of a change that did not happen. Only this process
hears them: replicas each announce what they themselves delete or expire.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from blobstore.models import artifact_uri

logger = logging.getLogger("blobstore.events")


class ArtifactChange(enum.StrEnum):
    CREATED = "created"
    DELETED = "deleted"
    EXPIRED = "expired"


@dataclass(frozen=True, slots=True)
class ArtifactEvent:
    change: ArtifactChange
    artifact_id: str
    namespace: str

    @property
    def uri(self) -> str:
        return artifact_uri(self.artifact_id)


Listener = Callable[[ArtifactEvent], Awaitable[None]]


class ArtifactEvents:
    """A registry of async listeners, called in subscription order for every event."""

    def __init__(self) -> None:
        self._listeners: list[Listener] = []

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Add ``listener``; the returned function removes it again (safe to call twice)."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    @property
    def listener_count(self) -> int:
        return len(self._listeners)

    async def emit(self, event: ArtifactEvent) -> None:
        # The change is already committed: a failing listener (a client that went away) must neither undo it
        # nor keep the other listeners from hearing it, so its failure is logged, without the event's content.
        for listener in list(self._listeners):
            try:
                await listener(event)
            except Exception:
                logger.exception("artifact event listener failed (change=%s)", event.change.value)

"""What content reads remember of the artifacts they just looked up, so that the ranges of a hot artifact skip
the metadata lookup (a fifth of a small range read's CPU on SQLite, a round trip on PostgreSQL).

An artifact's bytes, size, digests and blob never change: they are addressed by their hash. What changes is
whether it may be read: its expiry, its pin, its deletion. So what is remembered is used only this way:

- Only found artifacts are remembered; "not found" is always asked again.
- An entry answers for at most ``max_age`` seconds after its lookup (``BLOBSTORE_FACTS_CACHE_SECONDS``,
  default 1). A delete, an unpin or a shorter expiry made by another process on the same database (a replica,
  the CLI, a cleanup job) is seen by this process's reads within that bound; 0 turns remembering off.
- This process's own deletes and changes forget the entry at once (:meth:`ArtifactFacts.forget`).
- An entry whose remembered expiry has passed is forgotten and the database asked, so an expiry moved later
  elsewhere is never answered as a 404 from memory.
- A read of a remembered blob that finds it gone forgets the entry and asks again (the service does this).

The key is the namespace and the id together, so one namespace's entries never answer another's reads.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Final

from blobstore.models import Artifact, BlobInfo

MAX_ENTRIES: Final = 4096
"""Artifacts remembered at once (a few hundred bytes each): enough for any working set of hot artifacts, and
bounded whatever the ids asked for."""

Found = tuple[Artifact, BlobInfo]


class ArtifactFacts:
    """Found artifacts and their blobs by ``(namespace, id)``, each for at most ``max_age`` seconds."""

    __slots__ = ("_entries", "_monotonic", "max_age", "max_entries")

    def __init__(
        self,
        max_age: float,
        *,
        max_entries: int = MAX_ENTRIES,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_age = max_age
        self.max_entries = max_entries
        self._monotonic = monotonic
        self._entries: dict[tuple[str, str], tuple[float, Artifact, BlobInfo]] = {}

    @property
    def enabled(self) -> bool:
        return self.max_age > 0

    def get(self, namespace: str, artifact_id: str, now: datetime) -> Found | None:
        """The remembered artifact when it is still fresh and visible at ``now``, else None (ask the
        database)."""
        key = (namespace, artifact_id)
        entry = self._entries.get(key)
        if entry is None:
            return None
        looked_up, artifact, blob = entry
        if self._monotonic() - looked_up >= self.max_age or not _visible(artifact, now):
            self._entries.pop(key, None)
            return None
        return artifact, blob

    def put(self, artifact: Artifact, blob: BlobInfo) -> None:
        if self.max_age <= 0:
            return
        entries = self._entries
        if len(entries) >= self.max_entries:
            # The oldest lookup goes first (dicts keep insertion order); a re-put moves an entry to the end.
            del entries[next(iter(entries))]
        key = (artifact.namespace, artifact.id)
        entries.pop(key, None)
        entries[key] = (self._monotonic(), artifact, blob)

    def forget(self, namespace: str, artifact_id: str) -> None:
        self._entries.pop((namespace, artifact_id), None)

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


def _visible(artifact: Artifact, now: datetime) -> bool:
    """The metadata lookup's own rule (``repository.base.visible``): pinned, no expiry, or not yet expired."""
    return artifact.pinned or artifact.expires_at is None or artifact.expires_at > now

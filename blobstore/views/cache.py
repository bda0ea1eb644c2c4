"""Media views cached as renditions: content-addressed, immutable, living as long as their source.

A view's key is ``sha256(source sha256 + view parameters + renderer version)`` (:func:`rendition_key`):
every artifact over the same bytes shares one product, and bumping :data:`VIEW_VERSION` when a decoder
changes retires every old product. The product is a rendition of the store (:class:`ViewStore`): its bytes an
ordinary blob, written and verified like an artifact's and deduplicated like one, its row in the metadata
database, so every replica over the same database and storage shares it. Each rendition records the latest
expiry of the artifacts it was made for; past it a read is a miss, and cleanup deletes it then, or as soon as
no live artifact holds its source content. Renditions are reached only through a source artifact the caller
may read, so a key never crosses namespaces.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Protocol

import anyio

from blobstore.models import NewRendition, Rendition
from blobstore.records import RenditionRecords
from blobstore.storage.base import BlobStore
from blobstore.views.kind import View

VIEW_VERSION: Final = "4"
"""The renderer version in every key. 2: audio segments and keyframes count time from the file's own start
(an MP3's encoder delay, an MPEG-TS clock) and a contact sheet shows each keyframe once, so the products of
1 are never served again. 3: an audio file's duration is what decodes where its header claims more (a file
cut short), so the facts and segments of 2 are never served again. 4: a page's text holds no control
character but the line feed, and a word PDFium marks as broken at a line end is joined, so no page text of 3
is served again."""
_THREADS = anyio.CapacityLimiter(4)


def rendition_key(source_sha256: str, params: Mapping[str, Any], version: str) -> str:
    """``sha256`` of the source digest, the parameters and the renderer version, as canonical JSON."""
    payload = json.dumps(
        {"source": source_sha256, "params": dict(params), "version": version},
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(payload.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class ViewKey:
    """Where a view is cached: its rendition key, and the source content it derives from (which decides how
    long it lives)."""

    key: str
    source_sha256: str

    @classmethod
    def of(cls, source_sha256: str, params: Mapping[str, Any]) -> ViewKey:
        return cls(rendition_key(source_sha256, params, VIEW_VERSION), source_sha256)


class RenditionPublisher(Protocol):
    """Stores a rendition's bytes as a blob and commits its row
    (:meth:`~blobstore.publishing.Publisher.publish_rendition`)."""

    async def publish_rendition(self, data: bytes, sha256: str, rendition: NewRendition) -> Rendition: ...


def _outlives(stored: datetime | None, wanted: datetime | None) -> bool:
    """Whether a rendition stored with expiry ``stored`` lives at least as long as ``wanted`` asks."""
    if stored is None:
        return True
    return wanted is not None and stored >= wanted


class ViewStore:
    """Views as renditions: rows in the metadata database, bytes in the blob store."""

    def __init__(self, records: RenditionRecords, publisher: RenditionPublisher, blobs: BlobStore) -> None:
        self.records = records
        self.publisher = publisher
        self.blobs = blobs

    async def get(self, key: str, now: datetime) -> tuple[View, datetime | None] | None:
        """The live view of ``key`` (every byte checked against its blob's block digests) and its expiry."""
        found = await self.records.get_rendition(key, now=now)
        if found is None:
            return None
        parts = [piece async for piece in self.blobs.read(found.blob.info, 0, found.size)]
        view = View(data=b"".join(parts), mime_type=found.mime_type, meta=found.meta)
        return view, found.expires_at

    async def put(self, key: ViewKey, view: View, expires_at: datetime | None, now: datetime) -> None:
        digest = await anyio.to_thread.run_sync(_sha256, view.data, limiter=_THREADS)
        rendition = NewRendition(
            key=key.key,
            source_sha256=key.source_sha256,
            mime_type=view.mime_type,
            meta=view.meta,
            created_at=now,
            expires_at=expires_at,
        )
        await self.publisher.publish_rendition(view.data, digest, rendition)

    async def extend(self, key: str, expires_at: datetime | None) -> None:
        await self.records.extend_rendition(key, expires_at)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class ViewCache:
    """Single-flight get-or-compute over a :class:`ViewStore`, with counts of hits and computations."""

    def __init__(self, store: ViewStore, clock: Callable[[], datetime]) -> None:
        self.store = store
        self.clock = clock
        self.hits = 0
        """Views served from the store."""
        self.computed = 0
        """Views decoded (not found in the store)."""
        self._locks: dict[str, anyio.Lock] = {}

    async def lookup(self, key: ViewKey, expires_at: datetime | None) -> View | None:
        """The stored view (counted as a hit), kept alive at least until ``expires_at``; or None."""
        found = await self.store.get(key.key, self.clock())
        if found is None:
            return None
        view, stored = found
        if not _outlives(stored, expires_at):
            # Another artifact over the same bytes lives longer than the one the rendition was made for.
            await self.store.extend(key.key, expires_at)
        self.hits += 1
        return view

    async def put(self, key: ViewKey, view: View, expires_at: datetime | None) -> None:
        """Store a view just decoded (counted as computed)."""
        self.computed += 1
        await self.store.put(key, view, expires_at, self.clock())

    async def get_or_create(
        self, key: ViewKey, expires_at: datetime | None, compute: Callable[[], Awaitable[View]]
    ) -> View:
        found = await self.lookup(key, expires_at)
        if found is not None:
            return found
        lock = self._locks.setdefault(key.key, anyio.Lock())
        try:
            async with lock:
                found = await self.lookup(key, expires_at)
                if found is not None:
                    return found
                made = await compute()
                await self.put(key, made, expires_at)
                return made
        finally:
            if not lock.locked() and lock.statistics().tasks_waiting == 0:
                self._locks.pop(key.key, None)

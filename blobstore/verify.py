"""Scrub: re-read stored blobs, re-hash them and report missing, corrupt and orphaned ones.

Every read goes through the backend's verified read path (XXH3-128 per block) and the whole object
is re-hashed with SHA-256 against its row, so both a flipped bit and a swapped object are caught. ``sample``
checks a random fraction of the blobs, for routine runs over large stores. Orphans (objects no row names) are
listed in full: listing is cheap next to hashing.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

import anyio
import anyio.to_thread

from blobstore.clock import Clock
from blobstore.errors import Corruption, InvalidRequest, NotFound
from blobstore.records import BlobListing
from blobstore.storage.base import BlobStore

PAGE = 500
_TOMBSTONED = "tombstoned"


class VerifyProgress(Protocol):
    def checked(self, count: int, size: int) -> None: ...


@dataclass(slots=True)
class VerifyReport:
    sample: float
    blobs: int = 0
    """Blob rows considered (live ones; tombstoned rows are on their way out and skipped)."""
    checked: int = 0
    bytes_checked: int = 0
    missing: list[int] = field(default_factory=list)
    """Ids of blob rows whose object is gone."""
    corrupt: list[int] = field(default_factory=list)
    """Ids of blob rows whose object fails its checksums."""
    orphaned: list[str] = field(default_factory=list)
    """Storage keys older than the grace period that no row names (the orphan sweep frees them)."""
    orphaned_bytes: int = 0
    recent_unknown: int = 0
    """Objects without a row that are younger than the grace period: most likely writes in flight."""

    @property
    def ok(self) -> bool:
        return not self.missing and not self.corrupt

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "sample": self.sample,
            "blobs": self.blobs,
            "checked": self.checked,
            "bytes_checked": self.bytes_checked,
            "missing": list(self.missing),
            "corrupt": list(self.corrupt),
            "orphaned": list(self.orphaned),
            "orphaned_bytes": self.orphaned_bytes,
            "recent_unknown": self.recent_unknown,
        }


async def verify_store(
    repo: BlobListing,
    blobs: BlobStore,
    *,
    grace_seconds: int,
    clock: Clock,
    sample: float = 1.0,
    rng: random.Random | None = None,
    progress: VerifyProgress | None = None,
) -> VerifyReport:
    """Check a ``sample`` fraction (0 < sample <= 1) of the live blobs and list the orphaned objects older
    than ``grace_seconds``."""
    if not 0 < sample <= 1:
        raise InvalidRequest("sample must be in (0, 1]")
    chooser = rng or random.Random()  # sampling, not security
    report = VerifyReport(sample=sample)
    hashing = anyio.CapacityLimiter(1)
    after = 0
    while True:
        page = await repo.list_blobs(after_id=after, limit=PAGE)
        for record in page:
            if record.state == _TOMBSTONED:
                continue
            report.blobs += 1
            if sample < 1 and chooser.random() >= sample:
                continue
            report.checked += 1
            report.bytes_checked += record.info.size
            digest = hashlib.sha256()
            try:
                async for piece in blobs.read(record.info):
                    await anyio.to_thread.run_sync(digest.update, piece, limiter=hashing)
            except NotFound:
                # A sweep may have tombstoned and deleted it since the page was read: that is not a loss.
                current = await repo.get_blob(record.id)
                if current is not None and current.state != _TOMBSTONED:
                    report.missing.append(record.id)
            except Corruption:
                report.corrupt.append(record.id)
            else:
                if digest.hexdigest() != record.info.sha256:
                    report.corrupt.append(record.id)
            if progress is not None:
                progress.checked(1, record.info.size)
        if len(page) < PAGE:
            break
        after = page[-1].id
    await _find_orphans(repo, blobs, report, cutoff=clock() - timedelta(seconds=grace_seconds))
    return report


async def _find_orphans(
    repo: BlobListing, blobs: BlobStore, report: VerifyReport, *, cutoff: datetime
) -> None:
    batch: list[tuple[str, int, bool]] = []

    async def flush() -> None:
        known = await repo.known_storage_keys([key for key, _, _ in batch])
        for key, size, old in batch:
            if key in known:
                continue
            if old:
                report.orphaned.append(key)
                report.orphaned_bytes += size
            else:
                report.recent_unknown += 1
        batch.clear()

    async for stored in blobs.iter_objects():
        batch.append((stored.key, stored.size, stored.modified < cutoff))
        if len(batch) >= PAGE:
            await flush()
    await flush()

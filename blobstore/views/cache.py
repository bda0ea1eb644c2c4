"""Media views cached as renditions: content-addressed, immutable, living as long as their source.

A view's key is ``sha256(source sha256 + view parameters + renderer version)``
(:func:`rendition_key`): every artifact over the same bytes shares one product, and bumping
:data:`VIEW_VERSION` when a decoder changes retires every old product. Each entry records the latest expiry of
the sources it was made for; past it a read is a miss and cleanup deletes the file (:meth:`ViewStore.sweep`).
Entries are reached only through a source artifact the caller may read, so a key never crosses namespaces.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import anyio

VIEW_VERSION: Final = "1"
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
class View:
    """One cached product: its bytes, their type and the facts the answer states (page, times, size)."""

    data: bytes
    mime_type: str
    meta: dict[str, Any] = field(default_factory=dict)


def write_private(path: Path, header: bytes, data: bytes) -> None:
    """``header`` line and ``data`` into ``path`` atomically (directories 0700, file 0600, fsynced)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(header + b"\n" + data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_private(path: Path) -> tuple[dict[str, Any], bytes] | None:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    header, _, data = raw.partition(b"\n")
    return json.loads(header), data


def _expiry_text(expires_at: datetime | None) -> str | None:
    return None if expires_at is None else expires_at.isoformat()


def _outlives(stored: str | None, wanted: datetime | None) -> bool:
    """Whether an entry stored with expiry ``stored`` lives at least as long as ``wanted`` asks."""
    if stored is None:
        return True
    return wanted is not None and datetime.fromisoformat(stored) >= wanted


class ViewStore:
    """Views as files ``<root>/<key[:2]>/<key>``: a JSON header line (type, facts, expiry), then the bytes."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / key

    def _get(self, key: str, now: datetime) -> tuple[View, str | None] | None:
        found = read_private(self._path(key))
        if found is None:
            return None
        header, data = found
        expires = header.get("expires_at")
        if expires is not None and datetime.fromisoformat(expires) <= now:
            return None
        return View(data=data, mime_type=header["mime_type"], meta=header.get("meta", {})), expires

    async def get(self, key: str, now: datetime) -> tuple[View, str | None] | None:
        """The live entry and its expiry, or None."""
        return await anyio.to_thread.run_sync(self._get, key, now, limiter=_THREADS)

    async def put(self, key: str, view: View, expires_at: datetime | None) -> None:
        header = json.dumps(
            {"mime_type": view.mime_type, "meta": view.meta, "expires_at": _expiry_text(expires_at)},
            separators=(",", ":"),
        ).encode()
        await anyio.to_thread.run_sync(write_private, self._path(key), header, view.data, limiter=_THREADS)

    def _sweep(self, now: datetime) -> int:
        removed = 0
        if not self.root.is_dir():
            return 0
        for path in self.root.glob("??/*"):
            try:
                with path.open("rb") as file:
                    header = json.loads(file.readline())
            except (OSError, ValueError):
                continue
            expires = header.get("expires_at")
            if expires is not None and datetime.fromisoformat(expires) <= now:
                path.unlink(missing_ok=True)
                removed += 1
        return removed

    async def sweep(self, now: datetime) -> int:
        """Delete every entry whose sources have all expired; how many went."""
        return await anyio.to_thread.run_sync(self._sweep, now, limiter=_THREADS)


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

    async def lookup(self, key: str, expires_at: datetime | None) -> View | None:
        """The stored view (counted as a hit), kept alive at least until ``expires_at``; or None."""
        found = await self.store.get(key, self.clock())
        if found is None:
            return None
        view, stored = found
        if not _outlives(stored, expires_at):
            # Another artifact over the same bytes lives longer than the one the entry was made for.
            await self.store.put(key, view, expires_at)
        self.hits += 1
        return view

    async def put(self, key: str, view: View, expires_at: datetime | None) -> None:
        """Store a view just decoded (counted as computed)."""
        self.computed += 1
        await self.store.put(key, view, expires_at)

    async def get_or_create(
        self, key: str, expires_at: datetime | None, compute: Callable[[], Awaitable[View]]
    ) -> View:
        found = await self.lookup(key, expires_at)
        if found is not None:
            return found
        lock = self._locks.setdefault(key, anyio.Lock())
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
                self._locks.pop(key, None)

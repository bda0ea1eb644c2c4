"""Derived renditions (downscaled images), computed once per source, parameters and code version.

The cache key is ``sha256(source digest + parameters + RENDITION_VERSION)``: the same downscale of the same
bytes is computed once however many artifacts share those bytes, and bumping :data:`RENDITION_VERSION` when
the rendering code changes invalidates every old product. Products are bytes, never base64 strings, and the
in-memory store is bounded by total size; :class:`DirectoryRenditionStore` keeps them on disk (files 0600).
"""

from __future__ import annotations

import functools
import io
import json
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

import anyio

from blobstore.errors import MediaInvalid
from blobstore.png_repair import checked_png
from blobstore.private_files import read_private, write_private
from blobstore.views.cache import rendition_key as content_key

RENDITION_VERSION: Final = "1"
DEFAULT_MEMORY_BYTES: Final = 64 * 1024 * 1024
MAX_DECODE_PIXELS: Final = 80_000_000
"""Refuse to decode larger images (Pillow's bomb warning starts near 89 MP; warnings are errors in tests)."""

_THREADS = anyio.CapacityLimiter(4)


@dataclass(frozen=True, slots=True)
class Rendition:
    data: bytes
    mime_type: str
    width: int
    height: int


def rendition_key(source_sha256: str, params: Mapping[str, Any], version: str = RENDITION_VERSION) -> str:
    return content_key(source_sha256, params, version)


class RenditionStore(Protocol):
    async def get(self, key: str) -> Rendition | None: ...

    async def put(self, key: str, rendition: Rendition) -> None: ...


class MemoryRenditionStore:
    """Least-recently-used products up to ``max_bytes`` in total."""

    def __init__(self, max_bytes: int = DEFAULT_MEMORY_BYTES) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, Rendition] = OrderedDict()
        self._bytes = 0

    async def get(self, key: str) -> Rendition | None:
        found = self._items.get(key)
        if found is not None:
            self._items.move_to_end(key)
        return found

    async def put(self, key: str, rendition: Rendition) -> None:
        if len(rendition.data) > self.max_bytes:
            return
        old = self._items.pop(key, None)
        if old is not None:
            self._bytes -= len(old.data)
        self._items[key] = rendition
        self._bytes += len(rendition.data)
        while self._bytes > self.max_bytes:
            _, evicted = self._items.popitem(last=False)
            self._bytes -= len(evicted.data)


def _read_private(path: Path) -> Rendition | None:
    found = read_private(path)
    if found is None:
        return None
    facts, data = found
    return Rendition(data=data, mime_type=facts["mime_type"], width=facts["width"], height=facts["height"])


class DirectoryRenditionStore:
    """Products as files ``<root>/<key[:2]>/<key>`` (directories 0700, files 0600)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / key

    async def get(self, key: str) -> Rendition | None:
        return await anyio.to_thread.run_sync(_read_private, self._path(key), limiter=_THREADS)

    async def put(self, key: str, rendition: Rendition) -> None:
        header = json.dumps(
            {"mime_type": rendition.mime_type, "width": rendition.width, "height": rendition.height}
        ).encode()
        await anyio.to_thread.run_sync(
            write_private, self._path(key), header, rendition.data, limiter=_THREADS
        )


class RenditionCache:
    """Single-flight get-or-compute over a :class:`RenditionStore`."""

    def __init__(self, store: RenditionStore | None = None) -> None:
        self.store: RenditionStore = store or MemoryRenditionStore()
        self.computed = 0
        """How many products were actually computed (not served from the store)."""
        self._locks: dict[str, anyio.Lock] = {}

    async def get_or_create(self, key: str, compute: Callable[[], Awaitable[Rendition]]) -> Rendition:
        found = await self.store.get(key)
        if found is not None:
            return found
        lock = self._locks.setdefault(key, anyio.Lock())
        try:
            async with lock:
                found = await self.store.get(key)
                if found is not None:
                    return found
                made = await compute()
                self.computed += 1
                await self.store.put(key, made)
                return made
        finally:
            if not lock.locked() and lock.statistics().tasks_waiting == 0:
                self._locks.pop(key, None)


# -- images ---------------------------------------------------------------------------------------------

_KEEP_FORMATS: Final = {"PNG": "image/png", "JPEG": "image/jpeg"}


class NotAnImage(Exception):
    """Pillow could not decode the bytes (``reason`` in the decoder's words), or they exceed
    :data:`MAX_DECODE_PIXELS` (``pixels``: how many they have, 0 where the decoder only says "more")."""

    def __init__(self, reason: str, *, pixels: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.pixels = pixels


_BOMB_PIXELS = re.compile(r"\((\d+) pixels\)")


def _not_an_image(exc: Exception) -> NotAnImage:
    """Why Pillow refused the bytes, in words a line can carry (never the exception's own text)."""
    from PIL import Image, UnidentifiedImageError

    if isinstance(exc, MediaInvalid):
        return NotAnImage(exc.message)
    if isinstance(exc, Image.DecompressionBombError):
        found = _BOMB_PIXELS.search(str(exc))
        return NotAnImage("too many pixels", pixels=int(found.group(1)) if found else 0)
    if isinstance(exc, UnidentifiedImageError):
        return NotAnImage("its header is not one of an image format the decoder reads")
    if isinstance(exc, OSError) and "truncated" in str(exc).lower():
        return NotAnImage("its image data is truncated")
    return NotAnImage("its image data is damaged")


def downscale(data: bytes, long_edge: int, *, as_jpeg: bool = False) -> Rendition:
    """Fit an image within ``long_edge`` pixels on its longer side (never upscale); PNG stays PNG, JPEG stays
    JPEG, anything else becomes PNG -- or everything becomes JPEG with ``as_jpeg`` (photos saved as PNG
    shrink far more that way; transparency is lost). A PNG is read as browsers read it
    (:func:`~blobstore.png_repair.checked_png`). Blocking: run it in a worker thread."""
    from PIL import Image  # on first use: a server that never downscales does not hold Pillow

    try:
        with Image.open(checked_png(io.BytesIO(data))) as image:
            width, height = image.size
            if width * height > MAX_DECODE_PIXELS:
                raise NotAnImage("too many pixels", pixels=width * height)
            source_format = image.format or ""
            scale = min(1.0, long_edge / max(width, height))
            target = (max(1, round(width * scale)), max(1, round(height * scale)))
            if source_format == "JPEG":
                image.draft("RGB", target)
            frame = image.convert("RGBA") if image.mode in {"P", "LA", "PA"} else image.copy()
    except NotAnImage:
        raise
    except Exception as exc:  # any decoder failure: the caller links the original instead
        raise _not_an_image(exc) from exc
    if frame.size != target:
        frame = frame.resize(target, Image.Resampling.LANCZOS, reducing_gap=3.0)
    mime = "image/jpeg" if as_jpeg else _KEEP_FORMATS.get(source_format, "image/png")
    out = io.BytesIO()
    if mime == "image/jpeg":
        frame.convert("RGB").save(out, format="JPEG", quality=85, optimize=True)
    else:
        frame.save(out, format="PNG", optimize=True)
    return Rendition(data=out.getvalue(), mime_type=mime, width=target[0], height=target[1])


async def downscale_async(data: bytes, long_edge: int, *, as_jpeg: bool = False) -> Rendition:
    return await anyio.to_thread.run_sync(
        functools.partial(downscale, as_jpeg=as_jpeg), data, long_edge, limiter=_THREADS
    )

"""Thumbnails and previews of images: downscaled by Pillow in a worker thread, bounded, cached in memory.

An image is decoded only when its header says it has at most :data:`MAX_PIXELS` pixels (Pillow's decompression
bomb check, raised to an error), from an artifact of at most :data:`MAX_SOURCE_BYTES`; anything else, or
anything Pillow cannot read, has no thumbnail (the page shows its type instead); a PNG is read as browsers
read it (:func:`~blobstore.png_repair.checked_png`). Renditions are kept by namespace, content and size in a
least-recently-used cache of :data:`CACHE_BYTES`.
"""

from __future__ import annotations

import io
import threading
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from typing import Final

import anyio
import anyio.to_thread

from blobstore.errors import MediaInvalid
from blobstore.png_repair import checked_png

MAX_PIXELS: Final = 40_000_000
MAX_SOURCE_BYTES: Final = 64 * 1024 * 1024
CACHE_BYTES: Final = 32 * 1024 * 1024
EDGES: Final = (160, 1024)
"""The long edges offered: a list thumbnail and the preview (the full size is the content itself)."""
DECODABLE: Final = frozenset(
    {"image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp", "image/tiff"}
)
"""Types worth decoding (SVG is never rendered: it is a document that can hold script)."""

_THREADS = anyio.CapacityLimiter(2)


class NoThumbnail(Exception):
    """The bytes are not an image Pillow may decode within the limits."""


@dataclass(frozen=True, slots=True)
class Thumbnail:
    data: bytes
    mime_type: str
    width: int
    height: int


def make_thumbnail(data: bytes, long_edge: int) -> Thumbnail:
    """Fit the image within ``long_edge`` pixels (never upscale): PNG where it has transparency, else JPEG.
    Blocking: run it in a worker thread."""
    from PIL import Image  # on first use: a server whose console shows no images does not hold Pillow

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(checked_png(io.BytesIO(data))) as image:
                width, height = image.size
                if width * height > MAX_PIXELS:
                    raise NoThumbnail("too many pixels")
                image.draft("RGB", (long_edge, long_edge))
                image.seek(0)
                frame = image.convert("RGBA" if image.mode in {"P", "LA", "PA", "RGBA"} else "RGB")
    except NoThumbnail:
        raise
    except MediaInvalid as exc:  # a PNG whose critical chunk is damaged
        raise NoThumbnail(exc.message) from exc
    except Exception as exc:  # any decoder failure or bomb: no thumbnail
        raise NoThumbnail("not decodable") from exc
    frame.thumbnail((long_edge, long_edge), Image.Resampling.LANCZOS, reducing_gap=3.0)
    out = io.BytesIO()
    if frame.mode == "RGBA" and _minimum(frame.getchannel("A").getextrema()) < 255:
        frame.save(out, format="PNG", optimize=True)
        mime = "image/png"
    else:
        frame.convert("RGB").save(out, format="JPEG", quality=82, optimize=True)
        mime = "image/jpeg"
    return Thumbnail(out.getvalue(), mime, frame.width, frame.height)


def _minimum(extrema: object) -> float:
    low = extrema[0] if isinstance(extrema, tuple) else extrema
    return float(low) if isinstance(low, int | float) else 0.0


async def make_thumbnail_async(data: bytes, long_edge: int) -> Thumbnail:
    return await anyio.to_thread.run_sync(make_thumbnail, data, long_edge, limiter=_THREADS)


class ThumbnailCache:
    """Least recently used renditions, at most ``max_bytes`` of them."""

    def __init__(self, max_bytes: int = CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[tuple[str, str, int], Thumbnail] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, int]) -> Thumbnail | None:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def put(self, key: tuple[str, str, int], thumbnail: Thumbnail) -> None:
        with self._lock:
            if key in self._items or len(thumbnail.data) > self.max_bytes:
                return
            self._items[key] = thumbnail
            self._bytes += len(thumbnail.data)
            while self._bytes > self.max_bytes:
                _, dropped = self._items.popitem(last=False)
                self._bytes -= len(dropped.data)

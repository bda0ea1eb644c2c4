"""Media views of stored artifacts: the one implementation behind HTTP, MCP, the proxy and the console.

:class:`MediaViews` looks the source up for the caller (so another namespace's artifact is "not found", as
everywhere), keys the view by the source's content and the view's parameters, answers from the cache when it
can and otherwise runs the decoder in a worker process (:mod:`blobstore.views.runner`) over the blob's file
(local storage) or a private spooled copy (memory, S3). The cache is the store's renditions
(:mod:`blobstore.views.cache`), shared by every replica over the same database and storage.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import anyio

from blobstore.errors import BlobstoreError, UnsupportedMedia
from blobstore.models import Artifact, BlobInfo, Caller
from blobstore.service import ArtifactService
from blobstore.storage.base import NOT_KEPT
from blobstore.views.cache import View, ViewCache, ViewKey, ViewStore
from blobstore.views.decoders import Decoded, ocr_command
from blobstore.views.params import (
    FramesLayout,
    PageFormat,
    check_edge,
    check_frames,
    check_pages_exist,
    check_segment,
)
from blobstore.views.runner import DecoderRunner

PDF_TYPES: Final = frozenset({"application/pdf"})
DEEP_FACT_KINDS: Final = frozenset({"pdf", "audio", "video"})
PUBLISHED_FACTS: Final = frozenset(
    {"pages", "text_layer", "duration_seconds", "sample_rate", "channels", "width", "height", "frame_rate"}
)
"""The deep facts kept in an artifact's ``media`` (its JSON, its ``resource_link`` description)."""
_NOT_IMAGES: Final = frozenset({"image/svg+xml"})
SPOOL_DIR: Final = "view-sources"
"""Under the data directory: private copies of sources on S3 or in memory, each while a decoder reads it."""


def kind_of(mime_type: str) -> str | None:
    """``pdf``, ``audio``, ``video`` or ``image``: which family of views a type has, if any."""
    if mime_type in PDF_TYPES:
        return "pdf"
    if mime_type.startswith("audio/"):
        return "audio"
    if mime_type.startswith("video/"):
        return "video"
    if mime_type.startswith("image/") and mime_type not in _NOT_IMAGES:
        return "image"
    return None


@dataclass(frozen=True, slots=True)
class Source:
    """An artifact the caller may read, with the blob its views decode."""

    artifact: Artifact
    blob: BlobInfo

    @property
    def kind(self) -> str | None:
        return kind_of(self.artifact.mime_type)


@dataclass(frozen=True, slots=True)
class PageView:
    """One page of a ``pages`` read: its text layer (None when only the image was asked for) and its image
    (asked for, or standing in for a page without a text layer)."""

    page: int
    text: str | None
    image: View | None
    text_layer: bool
    ocr: bool = False
    """Whether ``text`` is what OCR read (the page has no text layer)."""


class MediaViews:
    def __init__(self, service: ArtifactService, *, spool: Path | None = None) -> None:
        settings = service.settings
        self.service = service
        self.spool = spool if spool is not None else settings.data_dir / SPOOL_DIR
        """Where the bytes of a source not on local disk are copied for a decoder (removed afterwards)."""
        self.cache = ViewCache(ViewStore(service.repo, service.publisher, service.blobs), service.clock)
        self.runner = DecoderRunner(
            workers=settings.view_workers,
            timeout=settings.view_timeout_seconds,
            memory_bytes=settings.view_memory_bytes,
        )
        self.max_pages = settings.view_max_pages
        self.max_audio_seconds = settings.view_max_audio_seconds
        self.default_edge = settings.image_long_edge
        self.ocr = ocr_command() is not None
        """Whether pages without a text layer are read by OCR (Tesseract is installed)."""

    # -- sources --------------------------------------------------------------------------------------------

    async def open(self, caller: Caller, artifact_id: str, *, kinds: tuple[str, ...] = ()) -> Source:
        """The caller's artifact (NotFound otherwise), refused with ``unsupported_media`` unless its type is
        one of ``kinds``."""
        artifact, blob = await self.service.open_artifact(caller, artifact_id)
        source = Source(artifact, blob)
        if kinds and source.kind not in kinds:
            wanted = " or ".join(kinds)
            raise UnsupportedMedia(
                f"{artifact.name} is {artifact.mime_type}; this view needs {wanted}",
                mime_type=artifact.mime_type,
            )
        return source

    @contextlib.asynccontextmanager
    async def _path(self, blob: BlobInfo, whole: bytes | None = None) -> AsyncIterator[str]:
        """A file of the blob's bytes: the blob itself on local storage, else a spooled private copy (of
        ``whole`` when the caller holds all of it: a blob the store did not keep)."""
        local = self.service.local_path(blob) if blob.key != NOT_KEPT else None
        if local is not None:
            yield str(local)
            return
        spool = self.spool
        await anyio.Path(spool).mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=spool, prefix="source-")
        os.close(fd)
        try:
            async with await anyio.open_file(name, "wb") as out:
                if whole is not None:
                    await out.write(whole)
                else:
                    async for piece in self.service.stream(blob):
                        await out.write(piece)
            yield name
        finally:
            with contextlib.suppress(FileNotFoundError):
                await anyio.Path(name).unlink()

    async def _decode(self, source: Source, op: str, **args: Any) -> Decoded:
        async with self._path(source.blob) as path:
            return await self.runner.run(op, path=path, **args)

    def _key(self, source: Source, params: Mapping[str, Any]) -> ViewKey:
        return ViewKey.of(source.artifact.sha256, params)

    @staticmethod
    def _expiry(source: Source) -> datetime | None:
        """How long the views of ``source`` live: as long as it does (a pinned one, for good)."""
        return None if source.artifact.pinned else source.artifact.expires_at

    async def _one(
        self, source: Source, params: Mapping[str, Any], compute: Callable[[], Awaitable[View]]
    ) -> View:
        return await self.cache.get_or_create(self._key(source, params), self._expiry(source), compute)

    async def _many(
        self,
        source: Source,
        params: list[dict[str, Any]],
        compute: Callable[[list[int]], Awaitable[list[View]]],
    ) -> list[View]:
        """Views for each of ``params``: those in the cache from it, the rest made by one decoder run."""
        keys = [self._key(source, p) for p in params]
        expires = self._expiry(source)
        found: list[View | None] = [await self.cache.lookup(key, expires) for key in keys]
        missing = [i for i, view in enumerate(found) if view is None]
        if missing:
            for i, view in zip(missing, await compute(missing), strict=True):
                await self.cache.put(keys[i], view, expires)
                found[i] = view
        return [view for view in found if view is not None]

    # -- facts ----------------------------------------------------------------------------------------------

    async def facts(self, source: Source) -> dict[str, Any]:
        """Page count and text layer (PDF); duration, rate, channels (audio); duration, size, rate (video).
        Empty for types without deep facts (images keep the facts taken at upload)."""
        return await self._facts(source.artifact.sha256, source.kind, source.blob, self._expiry(source))

    async def _facts(
        self,
        sha256: str,
        kind: str | None,
        blob: BlobInfo,
        expires_at: datetime | None,
        whole: bytes | None = None,
    ) -> dict[str, Any]:
        if kind not in DEEP_FACT_KINDS:
            return {}

        async def compute() -> View:
            async with self._path(blob, whole) as path:
                decoded = await self.runner.run(f"{kind}_facts", path=path)
            return View(
                data=json.dumps(decoded.meta).encode(), mime_type="application/json", meta=decoded.meta
            )

        key = ViewKey.of(sha256, {"op": "facts", "kind": kind})
        view = await self.cache.get_or_create(key, expires_at, compute)
        return dict(view.meta)

    async def probe_blob(
        self, mime_type: str, blob: BlobInfo, head: bytes, expires_at: datetime | None
    ) -> dict[str, Any]:
        """The deep facts of a blob being published (:data:`~blobstore.service.MediaProber`): what the
        decoder finds, or nothing when it refuses the bytes (the upload itself never fails for it)."""
        kind = kind_of(mime_type)
        if kind not in DEEP_FACT_KINDS:
            return {}
        whole = head if blob.key == NOT_KEPT or len(head) >= blob.size else None
        try:
            facts = await self._facts(blob.sha256, kind, blob, expires_at, whole)
        except BlobstoreError:
            return {}
        return {key: value for key, value in facts.items() if key in PUBLISHED_FACTS}

    # -- PDF ------------------------------------------------------------------------------------------------

    async def page_count(self, source: Source, pages: tuple[int, ...] = ()) -> int:
        """The PDF's number of pages, after checking that each of ``pages`` is one of them (``not_found``
        for a page past the last, on every edge)."""
        total = int((await self.facts(source)).get("pages", 0))
        check_pages_exist(pages, total)
        return total

    async def page_texts(self, source: Source, pages: tuple[int, ...]) -> list[View]:
        """The text layer of each page (UTF-8; empty for a page without one)."""
        wanted = list(pages)

        async def compute(missing: list[int]) -> list[View]:
            decoded = await self._decode(source, "pdf_pages_text", pages=[wanted[i] for i in missing])
            return [View(data=data, mime_type="text/plain", meta=meta) for meta, data in decoded.parts]

        return await self._many(source, [{"op": "page_text", "page": page} for page in wanted], compute)

    async def page_image(self, source: Source, page: int, max_edge: int | None = None) -> View:
        edge = check_edge(max_edge or self.default_edge)

        async def compute() -> View:
            decoded = await self._decode(source, "pdf_page_png", number=page, max_edge=edge)
            meta, data = decoded.parts[0]
            return View(data=data, mime_type="image/png", meta=meta)

        return await self._one(source, {"op": "page_png", "page": page, "max_edge": edge}, compute)

    async def page_ocr(self, source: Source, page: int) -> View:
        """What OCR reads on a page (Tesseract; ``unsupported_media`` when none is installed)."""

        async def compute() -> View:
            decoded = await self._decode(source, "pdf_page_ocr", number=page)
            meta, data = decoded.parts[0]
            return View(data=data, mime_type="text/plain", meta=meta)

        return await self._one(source, {"op": "page_ocr", "page": page, "engine": "tesseract"}, compute)

    async def pages(
        self, source: Source, pages: tuple[int, ...], page_format: PageFormat, max_edge: int | None = None
    ) -> list[PageView]:
        """Each page as ``page_format`` asks. A page without a text layer gets what OCR reads on it when an
        OCR engine is installed and reads something, and its image otherwise (and whenever images are asked
        for)."""
        texts = await self.page_texts(source, pages) if page_format != "image" else None
        out: list[PageView] = []
        for i, page in enumerate(pages):
            text = texts[i].data.decode("utf-8") if texts is not None else None
            has_text = bool(text)
            ocr = False
            if text is not None and not has_text and self.ocr:
                text = (await self.page_ocr(source, page)).data.decode("utf-8")
                ocr = bool(text)
            image = None
            if page_format != "text" or not (has_text or ocr):
                image = await self.page_image(source, page, max_edge)
            out.append(PageView(page=page, text=text, image=image, text_layer=has_text, ocr=ocr))
        return out

    # -- audio and video ------------------------------------------------------------------------------------

    async def audio(self, source: Source, start: float, duration: float | None = None) -> View:
        """``[start, start + duration)`` as 16 kHz mono PCM WAV; meta gives the exact start, end and total."""
        start, length = check_segment(
            start, self.max_audio_seconds if duration is None else duration, self.max_audio_seconds
        )

        async def compute() -> View:
            decoded = await self._decode(source, "audio_segment", start=start, duration=length)
            meta, data = decoded.parts[0]
            return View(data=data, mime_type="audio/wav", meta=meta)

        return await self._one(source, {"op": "audio", "start": start, "duration": length}, compute)

    async def frames(
        self, source: Source, count: int, *, max_edge: int | None = None, layout: FramesLayout = "frames"
    ) -> list[View]:
        """``count`` evenly spaced keyframes as JPEG (meta: index, time_seconds, size), or one sheet."""
        count = check_frames(count)
        edge = check_edge(max_edge or min(self.default_edge, 768))
        base = {"op": "frames", "count": count, "max_edge": edge, "layout": layout}
        indexes = [0] if layout == "sheet" else list(range(count))

        async def compute(missing: list[int]) -> list[View]:
            decoded = await self._decode(source, "video_frames", count=count, max_edge=edge, layout=layout)
            views = [View(data=data, mime_type="image/jpeg", meta=meta) for meta, data in decoded.parts]
            return [views[i] for i in missing]

        return await self._many(source, [{**base, "index": i} for i in indexes], compute)

    async def image(
        self, source: Source, region: tuple[int, int, int, int] | None, max_edge: int | None = None
    ) -> View:
        """A crop of the original (its pixels), fitted to the long-edge budget, as PNG."""
        edge = check_edge(max_edge or self.default_edge)
        params = {"op": "image", "region": list(region) if region else None, "max_edge": edge}

        async def compute() -> View:
            decoded = await self._decode(
                source, "image_view", region=list(region) if region else None, max_edge=edge
            )
            meta, data = decoded.parts[0]
            return View(data=data, mime_type="image/png", meta=meta)

        return await self._one(source, params, compute)


def distinct_frames(frames: list[View]) -> list[View]:
    """The keyframes of a ``frames`` view, each once (the first of several at the same time): evenly spaced
    times of a video with fewer keyframes land on one keyframe for several."""
    seen: set[float] = set()
    out: list[View] = []
    for view in frames:
        time = view.meta.get("time_seconds")
        if time is not None:
            if time in seen:
                continue
            seen.add(time)
        out.append(view)
    return out


_ENGINES: weakref.WeakKeyDictionary[ArtifactService, MediaViews] = weakref.WeakKeyDictionary()


def views_for(service: ArtifactService) -> MediaViews:
    """The one view engine of an open store. Found from the service every edge already holds, so that HTTP,
    MCP (standalone, embedded, behind the proxy) and the console share one cache and one worker limit."""
    engine = _ENGINES.get(service)
    if engine is None:
        engine = _ENGINES[service] = MediaViews(service)
    return engine

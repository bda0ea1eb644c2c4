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
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import anyio

from blobstore.errors import BlobstoreError, UnsupportedMedia
from blobstore.models import BlobInfo, Caller
from blobstore.service import ArtifactService
from blobstore.storage.base import NOT_KEPT
from blobstore.views.cache import ViewCache, ViewKey, ViewStore
from blobstore.views.engines import tesseract, vad
from blobstore.views.kind import Decoded, Source, View, kind_of
from blobstore.views.kinds import frames as frames_kind
from blobstore.views.kinds import ocr as ocr_kind
from blobstore.views.kinds import pages as pages_kind
from blobstore.views.kinds import regions as regions_kind
from blobstore.views.kinds import segments as segments_kind
from blobstore.views.kinds.pages import PageView
from blobstore.views.ocr_text import OcrText, ocr_text
from blobstore.views.params import FramesLayout, PageFormat
from blobstore.views.runner import DecoderRunner

DEEP_FACT_KINDS: Final = frozenset({"pdf", "audio", "video"})
PUBLISHED_FACTS: Final = frozenset(
    {
        "pages",
        "text_layer",
        "duration_seconds",
        "sample_rate",
        "channels",
        "width",
        "height",
        "frame_rate",
        "speech",
    }
)
"""The deep facts kept in an artifact's ``media`` (its JSON, its ``resource_link`` description)."""
PROBE_OPS: Final = {
    "image": "image_facts",
    "audio": "audio_facts",
    "video": "video_probe",
    "document": "pdf_facts",
}
"""The decoder job behind :meth:`MediaViews.probe` for each kind of typed media argument."""
SPEECH_KINDS: Final = frozenset({"audio", "video"})
"""The kinds of source whose facts include a speech map."""
PUBLISHED_SPANS: Final = 20
"""The most spans of speech an artifact's facts list: past it, the closest spans are joined."""
_JOIN_GAPS: Final = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0, float("inf"))
SPOOL_DIR: Final = "view-sources"
"""Under the data directory: private copies of sources on S3 or in memory, each while a decoder reads it."""


class MediaViews:
    def __init__(self, service: ArtifactService, *, spool: Path | None = None) -> None:
        settings = service.settings
        self.service = service
        self.settings = settings
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
        self.ocr = tesseract.command() is not None
        """Whether pages without a text layer are read by OCR (Tesseract is installed)."""
        self.ocr_languages = tuple(settings.ocr_languages.split("+"))
        self.ocr_min_confidence = settings.ocr_min_confidence

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

    async def decode(self, source: Source, op: str, **args: Any) -> Decoded:
        async with self._path(source.blob) as path:
            return await self.runner.run(op, path=path, **args)

    def _key(self, source: Source, params: Mapping[str, Any]) -> ViewKey:
        return ViewKey.of(source.artifact.sha256, params)

    @staticmethod
    def _expiry(source: Source) -> datetime | None:
        """How long the views of ``source`` live: as long as it does (a pinned one, for good)."""
        return None if source.artifact.pinned else source.artifact.expires_at

    async def one(
        self, source: Source, params: Mapping[str, Any], compute: Callable[[], Awaitable[View]]
    ) -> View:
        return await self.cache.get_or_create(self._key(source, params), self._expiry(source), compute)

    async def many(
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
        facts = dict(view.meta)
        if kind in SPEECH_KINDS and facts.get("has_audio", True):
            with contextlib.suppress(BlobstoreError):  # a map that cannot be made leaves the other facts
                spans = await self._speech(sha256, blob, expires_at, whole)
                facts["speech"] = published_speech(spans, float(facts["duration_seconds"]))
        return facts

    async def speech(self, source: Source) -> list[tuple[float, float]]:
        """Where speech is in an audio or video source (its first audio stream): spans in seconds from its
        start, as the voice-activity detector found them, cached like a view."""
        return await self._speech(source.artifact.sha256, source.blob, self._expiry(source))

    async def _speech(
        self, sha256: str, blob: BlobInfo, expires_at: datetime | None, whole: bytes | None = None
    ) -> list[tuple[float, float]]:
        async def compute() -> View:
            async with self._path(blob, whole) as path:
                decoded = await self.runner.run("speech_map", path=path)
            return View(
                data=json.dumps(decoded.meta).encode(), mime_type="application/json", meta=decoded.meta
            )

        key = ViewKey.of(sha256, {"op": "speech", "vad": vad.NAME})
        view = await self.cache.get_or_create(key, expires_at, compute)
        return [(float(start), float(end)) for start, end in view.meta["speech"]]

    async def probe(
        self, kind: str, *, source: Source | None = None, path: str | None = None
    ) -> dict[str, Any]:
        """The facts a typed media argument is checked against, decoded in a worker with its limits: those of
        :data:`PROBE_OPS` ``kind``, each after checking that the media decodes. A whole artifact's are cached
        by its content like a view (one probe for every call and replica that passes it); a file's (inline
        bytes, a download, a window of an artifact) are not."""
        op = PROBE_OPS[kind]
        if path is not None:
            return dict((await self.runner.run(op, path=path)).meta)
        if source is None:
            raise ValueError("probe needs a source or a path")

        async def compute() -> View:
            decoded = await self.decode(source, op)
            return View(
                data=json.dumps(decoded.meta).encode(), mime_type="application/json", meta=decoded.meta
            )

        key = ViewKey.of(source.artifact.sha256, {"op": "probe", "kind": kind})
        view = await self.cache.get_or_create(key, self._expiry(source), compute)
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

    # -- today's views by name ------------------------------------------------------------------------------
    # For callers that know which view they want (the tests, bench/views.py). The edges reach every kind, a
    # new one too, through its declaration (blobstore.views.kinds), never through a method here.

    async def page_count(self, source: Source, pages: tuple[int, ...] = ()) -> int:
        return await pages_kind.page_count(self, source, pages)

    async def page_texts(self, source: Source, pages: tuple[int, ...]) -> list[View]:
        return await pages_kind.page_texts(self, source, pages)

    async def page_image(self, source: Source, page: int, max_edge: int | None = None) -> View:
        return await pages_kind.page_image(self, source, page, max_edge)

    async def page_ocr(self, source: Source, page: int) -> View:
        return await pages_kind.page_ocr(self, source, page)

    async def pages(
        self,
        source: Source,
        pages: tuple[int, ...],
        page_format: PageFormat,
        max_edge: int | None = None,
    ) -> list[PageView]:
        return await pages_kind.read_pages(self, source, pages, page_format, max_edge)

    async def audio(self, source: Source, start: float, duration: float | None = None) -> View:
        return await segments_kind.audio(self, source, start, duration)

    async def frames(
        self, source: Source, count: int, *, max_edge: int | None = None, layout: FramesLayout = "frames"
    ) -> list[View]:
        return await frames_kind.frames(self, source, count, max_edge=max_edge, layout=layout)

    async def scenes(
        self, source: Source, count: int, *, max_edge: int | None = None, layout: FramesLayout = "frames"
    ) -> list[View]:
        return await frames_kind.scene_frames(self, source, count, max_edge=max_edge, layout=layout)

    async def image(
        self, source: Source, region: tuple[int, int, int, int] | None, max_edge: int | None = None
    ) -> View:
        return await regions_kind.image(self, source, region, max_edge)

    async def image_ocr(self, source: Source, region: tuple[int, int, int, int] | None) -> View:
        return await ocr_kind.read_image_ocr(self, source, region)

    def ocr_text(self, view: View) -> OcrText:
        """The text of an OCR document, its words under ``BLOBSTORE_OCR_MIN_CONFIDENCE`` marked."""
        return ocr_text(json.loads(view.data), self.ocr_min_confidence)


def published_speech(spans: list[tuple[float, float]], total: float) -> list[list[float]]:
    """The speech map an artifact's facts state: at most :data:`PUBLISHED_SPANS` spans, the closest joined
    first (a long meeting's pauses between sentences before its breaks), to the centisecond."""
    for gap in _JOIN_GAPS:
        if len(spans) <= PUBLISHED_SPANS:
            break
        spans = vad.join(spans, total, gap=gap)
    return [[round(start, 2), round(end, 2)] for start, end in spans]


_ENGINES: weakref.WeakKeyDictionary[ArtifactService, MediaViews] = weakref.WeakKeyDictionary()


def views_for(service: ArtifactService) -> MediaViews:
    """The one view engine of an open store. Found from the service every edge already holds, so that HTTP,
    MCP (standalone, embedded, behind the proxy) and the console share one cache and one worker limit."""
    engine = _ENGINES.get(service)
    if engine is None:
        engine = _ENGINES[service] = MediaViews(service)
    return engine

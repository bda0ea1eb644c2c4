"""Media views over HTTP: a PDF's page text and page image, an audio segment, a video's keyframes.

The same views as ``read_artifact`` over MCP (:mod:`blobstore.views`), with the same authentication and
namespace rules as content reads. A view of immutable content is immutable: a strong ``ETag`` (of the
source's content, the view's parameters and the renderer version), ``Cache-Control: immutable``, and ``304``
for a matching ``If-None-Match`` before anything is decoded. ``HEAD`` answers every route with the headers its
``GET`` would send (the view is made, or found in the cache, to know its length) and no body, as content reads
do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Path, Query, Request, Response
from fastapi.responses import JSONResponse

from blobstore.api.deps import BaseUrlDep, CallerDep, ServiceDep
from blobstore.api.download_responses import CACHE_CONTROL
from blobstore.api.headers import http_date
from blobstore.errors import NotFound
from blobstore.ranges import none_match
from blobstore.views.cache import VIEW_VERSION, View, rendition_key
from blobstore.views.engine import MediaViews, Source, distinct_frames, views_for
from blobstore.views.params import MAX_EDGE, MAX_FRAMES, MIN_EDGE, check_frames

router = APIRouter(prefix="/v1/artifacts", tags=["views"])

_VIEW_RESPONSES: dict[int | str, dict[str, Any]] = {
    304: {"description": "Not modified (If-None-Match)"},
    404: {"description": "No such artifact (or another namespace's)"},
    413: {"description": "view_too_large: over the pixel, memory or size budget"},
    415: {"description": "unsupported_media: the artifact's type has no such view"},
    422: {"description": "media_invalid: the decoder refused the bytes"},
    504: {"description": "view_timeout: the decoder ran past its time"},
}

_Endpoint = TypeVar("_Endpoint", bound=Callable[..., Any])

PageNumber = Annotated[int, Path(ge=1, le=9_999_999)]
Edge = Annotated[int | None, Query(ge=MIN_EDGE, le=MAX_EDGE, description="Longest side in pixels")]


def _etag(source: Source, params: dict[str, Any]) -> str:
    return '"view-' + rendition_key(source.artifact.sha256, params, VIEW_VERSION)[:40] + '"'


def _headers(source: Source, etag: str) -> dict[str, str]:
    return {
        "etag": etag,
        "cache-control": CACHE_CONTROL,
        "last-modified": http_date(source.artifact.created_at),
    }


def _view_routes(path: str, name: str, **route: Any) -> Callable[[_Endpoint], _Endpoint]:
    """``GET`` and ``HEAD`` of one view route, each its own OpenAPI operation."""

    def register(endpoint: _Endpoint) -> _Endpoint:
        router.head(
            path, operation_id=f"head_{name}", **{**route, "summary": f"Headers of: {route['summary']}"}
        )(endpoint)
        return router.get(path, operation_id=name, **route)(endpoint)

    return register


def _bodiless(request: Request, response: Response) -> Response:
    """The response as ``HEAD`` sends it: every header (``content-length`` the body's), no body."""
    if request.method != "HEAD":
        return response
    headers = dict(response.headers)
    headers["content-length"] = str(len(response.body))
    return Response(status_code=response.status_code, headers=headers)


def _fresh(request: Request, source: Source, etag: str) -> Response | None:
    """A ``304`` when the client holds this view already."""
    if_none_match = request.headers.get("if-none-match")
    if if_none_match is not None and none_match(if_none_match, etag):
        return Response(status_code=304, headers=_headers(source, etag))
    return None


def _answer(
    request: Request, source: Source, etag: str, view: View, media_type: str | None = None
) -> Response:
    response = Response(view.data, media_type=media_type or view.mime_type, headers=_headers(source, etag))
    return _bodiless(request, response)


async def _pdf_page(views: MediaViews, caller: CallerDep, artifact_id: str, page: int) -> Source:
    source = await views.open(caller, artifact_id, kinds=("pdf",))
    await views.page_count(source, (page,))
    return source


@_view_routes(
    "/{artifact_id}/pages/{page}.txt",
    "page_text",
    summary="The text layer of one PDF page (UTF-8; empty for a page without one)",
    response_class=Response,
    responses={200: {"content": {"text/plain": {}}}, **_VIEW_RESPONSES},
)
async def page_text(
    request: Request, artifact_id: str, page: PageNumber, service: ServiceDep, caller: CallerDep
) -> Response:
    views = views_for(service)
    source = await _pdf_page(views, caller, artifact_id, page)
    etag = _etag(source, {"route": "page.txt", "page": page})
    fresh = _fresh(request, source, etag)
    if fresh is not None:
        return fresh
    (view,) = await views.page_texts(source, (page,))
    return _answer(request, source, etag, view, "text/plain; charset=utf-8")


@_view_routes(
    "/{artifact_id}/pages/{page}.png",
    "page_image",
    summary="One PDF page rendered as PNG within the long-edge budget",
    response_class=Response,
    responses={200: {"content": {"image/png": {}}}, **_VIEW_RESPONSES},
)
async def page_image(
    request: Request,
    artifact_id: str,
    page: PageNumber,
    service: ServiceDep,
    caller: CallerDep,
    max_edge: Edge = None,
) -> Response:
    views = views_for(service)
    source = await _pdf_page(views, caller, artifact_id, page)
    etag = _etag(source, {"route": "page.png", "page": page, "max_edge": max_edge})
    fresh = _fresh(request, source, etag)
    if fresh is not None:
        return fresh
    return _answer(request, source, etag, await views.page_image(source, page, max_edge))


@_view_routes(
    "/{artifact_id}/audio",
    "audio_segment",
    summary="A segment of audio (or a video's sound) as 16 kHz mono PCM WAV",
    response_class=Response,
    responses={200: {"content": {"audio/wav": {}}}, **_VIEW_RESPONSES},
)
async def audio_segment(
    request: Request,
    artifact_id: str,
    service: ServiceDep,
    caller: CallerDep,
    start: Annotated[float, Query(ge=0, description="Start in seconds")] = 0.0,
    duration: Annotated[
        float | None, Query(gt=0, description="Length in seconds (default and most: the segment limit)")
    ] = None,
) -> Response:
    views = views_for(service)
    source = await views.open(caller, artifact_id, kinds=("audio", "video"))
    etag = _etag(source, {"route": "audio", "start": start, "duration": duration})
    fresh = _fresh(request, source, etag)
    if fresh is not None:
        return fresh
    view = await views.audio(source, start, duration)
    response = _answer(request, source, etag, view)
    response.headers["x-view-start-seconds"] = str(view.meta["start_seconds"])
    response.headers["x-view-end-seconds"] = str(view.meta["end_seconds"])
    response.headers["x-media-duration-seconds"] = str(view.meta["duration_seconds"])
    return response


FrameCount = Annotated[int, Query(ge=1, le=MAX_FRAMES, description="Evenly spaced keyframes")]


@_view_routes(
    "/{artifact_id}/frames",
    "frames",
    summary="Evenly spaced keyframes of a video: their times and image URLs",
    responses=_VIEW_RESPONSES,
)
async def frames(
    request: Request,
    artifact_id: str,
    service: ServiceDep,
    caller: CallerDep,
    base: BaseUrlDep,
    count: FrameCount = 6,
    max_edge: Edge = None,
) -> Response:
    views = views_for(service)
    source = await views.open(caller, artifact_id, kinds=("video",))
    # The listing names its frames by absolute URL, so the base it was built for is part of its identity.
    etag = _etag(source, {"route": "frames", "count": count, "max_edge": max_edge, "base": base})
    fresh = _fresh(request, source, etag)
    if fresh is not None:
        return fresh
    facts = await views.facts(source)
    made = distinct_frames(await views.frames(source, check_frames(count), max_edge=max_edge))
    edge = f"&max_edge={max_edge}" if max_edge is not None else ""
    where = f"{base}/v1/artifacts/{source.artifact.id}/frames"
    items = [{**view.meta, "url": f"{where}/{view.meta['index']}.jpg?count={count}{edge}"} for view in made]
    listing = JSONResponse(
        {"artifact_id": source.artifact.id, "video": facts, "frames": items}, headers=_headers(source, etag)
    )
    return _bodiless(request, listing)


@_view_routes(
    "/{artifact_id}/frames/{index}.jpg",
    "frame_image",
    summary="One keyframe of a video (of `count` evenly spaced) as JPEG",
    response_class=Response,
    responses={200: {"content": {"image/jpeg": {}}}, **_VIEW_RESPONSES},
)
async def frame_image(
    request: Request,
    artifact_id: str,
    index: Annotated[int, Path(ge=0, lt=MAX_FRAMES)],
    service: ServiceDep,
    caller: CallerDep,
    count: FrameCount = 6,
    max_edge: Edge = None,
) -> Response:
    views = views_for(service)
    source = await views.open(caller, artifact_id, kinds=("video",))
    if index >= count:
        raise NotFound(f"frame {index} of {count}: frames count from 0")
    etag = _etag(source, {"route": "frame", "index": index, "count": count, "max_edge": max_edge})
    fresh = _fresh(request, source, etag)
    if fresh is not None:
        return fresh
    made = await views.frames(source, count, max_edge=max_edge)
    return _answer(request, source, etag, made[index])

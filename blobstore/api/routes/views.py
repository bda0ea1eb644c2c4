"""Media views over HTTP: every route every view kind declares (:data:`blobstore.views.kinds.KINDS`).

The same views as ``read_artifact`` over MCP (:mod:`blobstore.views`), with the same authentication and
namespace rules as content reads. A view of immutable content is immutable: a strong ``ETag`` (of the
source's content, the view's parameters and the renderer version), ``Cache-Control: immutable``, and ``304``
for a matching ``If-None-Match`` before anything is decoded. ``HEAD`` answers every route with the headers its
``GET`` would send (the view is made, or found in the cache, to know its length) and no body, as content reads
do.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, cast

from fastapi import APIRouter, Path, Query, Request, Response
from fastapi.responses import JSONResponse

from blobstore.api.deps import BaseUrlDep, CallerDep, ServiceDep
from blobstore.api.download_responses import CACHE_CONTROL
from blobstore.api.headers import http_date
from blobstore.models import Caller
from blobstore.ranges import none_match
from blobstore.service import ArtifactService
from blobstore.views.cache import VIEW_VERSION, rendition_key
from blobstore.views.engine import views_for
from blobstore.views.kind import REQUIRED, Argument, Payload, Route, Source, ViewKind
from blobstore.views.kinds import KINDS

router = APIRouter(prefix="/v1/artifacts", tags=["views"])

_VIEW_RESPONSES: dict[int | str, dict[str, Any]] = {
    304: {"description": "Not modified (If-None-Match)"},
    404: {"description": "No such artifact (or another namespace's)"},
    413: {"description": "view_too_large: over the pixel, memory or size budget"},
    415: {"description": "unsupported_media: the artifact's type has no such view"},
    422: {"description": "media_invalid: the decoder refused the bytes"},
    504: {"description": "view_timeout: the decoder ran past its time"},
}


def _etag(source: Source, params: dict[str, Any]) -> str:
    return '"view-' + rendition_key(source.artifact.sha256, params, VIEW_VERSION)[:40] + '"'


def _headers(source: Source, etag: str) -> dict[str, str]:
    return {
        "etag": etag,
        "cache-control": CACHE_CONTROL,
        "last-modified": http_date(source.artifact.created_at),
    }


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


def _parameter(argument: Argument) -> inspect.Parameter:
    """A route's parameter as FastAPI reads it from the endpoint's signature: a path or query parameter,
    bounded and described as the kind declares it."""
    where = Path if argument.where == "path" else Query
    options = dict(argument.bounds)
    if argument.description:
        assert isinstance(argument.description, str), "an HTTP parameter's words name no setting"
        options["description"] = argument.description
    # Annotated over a type known only here: subscribed at run time, as FastAPI reads it.
    annotation = cast(Any, Annotated)[argument.annotation, where(**options)]
    default = inspect.Parameter.empty if argument.default is REQUIRED else argument.default
    return inspect.Parameter(
        argument.name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default
    )


def _endpoint(kind: ViewKind, route: Route) -> Callable[..., Awaitable[Response]]:
    """One function answering ``route`` for every request, with the signature FastAPI reads its parameters
    from: the artifact id and the path parameters, the service and the caller, the request's base URL when
    the answer names URLs, then the query parameters."""

    async def endpoint(
        request: Request, artifact_id: str, service: ArtifactService, caller: Caller, **values: Any
    ) -> Response:
        views = views_for(service)
        source = await views.open(caller, artifact_id, kinds=route.sources or kind.sources)
        if route.check is not None:
            await route.check(views, source, values)
        etag = _etag(source, {**route.etag(values), **(route.varies(views) if route.varies else {})})
        fresh = _fresh(request, source, etag)
        if fresh is not None:
            return fresh
        made = await route.answer(views, source, values)
        if not isinstance(made, Payload):
            return _bodiless(request, JSONResponse(made, headers=_headers(source, etag)))
        response = _bodiless(
            request, Response(made.data, media_type=made.media_type, headers=_headers(source, etag))
        )
        response.headers.update(made.headers)
        return response

    keyword = inspect.Parameter.KEYWORD_ONLY
    path = [argument for argument in route.parameters if argument.where == "path"]
    query = [argument for argument in route.parameters if argument.where == "query"]
    endpoint.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter("request", keyword, annotation=Request),
            inspect.Parameter("artifact_id", keyword, annotation=str),
            *(_parameter(argument) for argument in path),
            inspect.Parameter("service", keyword, annotation=ServiceDep),
            inspect.Parameter("caller", keyword, annotation=CallerDep),
            *([inspect.Parameter("base", keyword, annotation=BaseUrlDep)] if route.base_url else []),
            *(_parameter(argument) for argument in query),
        ]
    )
    endpoint.__name__ = route.name
    return endpoint


def _mount(kind: ViewKind, route: Route) -> None:
    """``GET`` and ``HEAD`` of one route, each its own operation in the API document."""
    endpoint = _endpoint(kind, route)
    options: dict[str, Any] = {"summary": route.summary, "responses": _VIEW_RESPONSES}
    if route.media_type is not None:
        options["response_class"] = Response
        options["responses"] = {200: {"content": {route.media_type: {}}}, **_VIEW_RESPONSES}
    path = "/{artifact_id}" + route.path
    router.head(
        path, operation_id=f"head_{route.name}", **{**options, "summary": f"Headers of: {route.summary}"}
    )(endpoint)
    router.get(path, operation_id=route.name, **options)(endpoint)


for _kind in KINDS:
    for _route in _kind.routes:
        _mount(_kind, _route)

"""Artifacts: single-request upload, list, get, update, delete, and content downloads with ranges."""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import Field, TypeAdapter, ValidationError
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Receive, Send
from starlette.types import Scope as StarletteScope

from blobstore.api.body import declared_length, json_body_openapi, read_json
from blobstore.api.conditional import DownloadPlan, plan_download
from blobstore.api.deps import (
    BaseUrlDep,
    CallerDep,
    ServiceDep,
    SettingsDep,
    app_state,
    base_url,
    get_caller,
)
from blobstore.api.download_responses import ACCEL_REDIRECT, build_download, read_at_once, representation
from blobstore.api.errors import on_blobstore_error, on_unexpected
from blobstore.api.guard import CONTROL
from blobstore.api.headers import CONTENT_DIGEST, first_values, parse_content_digest
from blobstore.api.multipart import StreamingForm, boundary_of
from blobstore.api.observe import Answer, Observe, begin_request, end_request
from blobstore.api.redirects import presigned_redirect, redirectable
from blobstore.api.request_guard import RequestGuard
from blobstore.api.schemas import ArtifactOut, ArtifactPage, UpdateArtifactRequest, artifact_out
from blobstore.config import Settings
from blobstore.digests import normalize_sha256
from blobstore.errors import BlobstoreError, InvalidRequest
from blobstore.models import UNSET, Artifact, Caller
from blobstore.validation import validate_mime, validate_name

router = APIRouter(prefix="/v1/artifacts", tags=["artifacts"])

CONTENT_PATH = "/v1/artifacts/{artifact_id}/content"

DEFAULT_NAME = "upload"
"""The name of an artifact uploaded without one (as for tus uploads without metadata)."""

UPLOAD_PATH = "/v1/artifacts"

_GENERIC_TYPES = frozenset({"", "application/octet-stream", "application/x-www-form-urlencoded"})

_UPLOAD_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    # Text fields first, then the file (the order the properties are listed in).
                    "additionalProperties": False,
                    "properties": {
                        "name": {"type": "string"},
                        "mime_type": {"type": "string"},
                        "ttl_seconds": {"type": "integer", "minimum": 1},
                        "file": {"type": "string", "format": "binary"},
                    },
                }
            },
            "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
        },
    }
}


def _declared_type(content_type: str | None) -> str | None:
    """A media type worth keeping as a claim; generic ones leave the type to sniffing and the name."""
    if content_type is None:
        return None
    base = content_type.split(";", 1)[0].strip().lower()
    return None if base in _GENERIC_TYPES else base


def _parse_ttl(text: str | None) -> int | None:
    if text is None or text == "":
        return None
    if not text.isdigit():
        raise InvalidRequest("ttl_seconds must be a positive integer")
    return int(text)


def _claimed_sha256(query_value: str | None, digest_header: str | None) -> str | None:
    from_query = normalize_sha256(query_value) if query_value is not None else None
    from_header = parse_content_digest(digest_header) if digest_header is not None else None
    if from_query and from_header and from_query != from_header:
        raise InvalidRequest("the sha256 parameter and Content-Digest disagree")
    return from_query or from_header


_TTL_QUERY: TypeAdapter[int] = TypeAdapter(Annotated[int, Field(gt=0)])
"""``ttl_seconds`` in the query, validated as FastAPI validates the documented parameter."""


@router.post(
    "",
    status_code=201,
    response_model=ArtifactOut,
    openapi_extra=_UPLOAD_BODY,
    summary="Upload a whole artifact in one request (multipart/form-data or a raw body)",
)
async def upload_artifact(
    request: Request,
    caller: CallerDep,
    name: Annotated[
        str | None, Query(description=f"Name (default: the file part's filename, else {DEFAULT_NAME!r})")
    ] = None,
    mime_type: Annotated[str | None, Query()] = None,
    ttl_seconds: Annotated[int | None, Query(gt=0)] = None,
    sha256: Annotated[str | None, Query(description="Expected SHA-256 (hex)")] = None,
) -> Response:
    # UploadRoute, mounted ahead of this route, answers every POST of this path: this one describes the
    # operation and its parameters in the OpenAPI document (and is what UploadRoute is tested against).
    return await store_upload(
        request, caller, name=name, mime_type=mime_type, ttl_seconds=ttl_seconds, sha256=sha256
    )


async def serve_upload(request: Request) -> Response:
    """``POST`` of a whole artifact, read straight off the request (no dependency resolution).

    In FastAPI's order: the caller first (an unauthenticated request learns nothing about its parameters),
    then the query parameters.
    """
    caller = await get_caller(request)
    params = request.query_params
    return await store_upload(
        request,
        caller,
        name=params.get("name"),
        mime_type=params.get("mime_type"),
        ttl_seconds=_query_ttl(params.get("ttl_seconds")),
        sha256=params.get("sha256"),
    )


def _query_ttl(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return _TTL_QUERY.validate_python(text)
    except ValidationError as exc:
        errors = [
            {**error, "loc": ("query", "ttl_seconds", *error["loc"])}
            for error in exc.errors(include_url=False)
        ]
        raise RequestValidationError(errors) from None


async def store_upload(
    request: Request,
    caller: Caller,
    *,
    name: str | None,
    mime_type: str | None,
    ttl_seconds: int | None,
    sha256: str | None,
) -> Response:
    service = app_state(request.app).service
    content_type = request.headers.get("content-type", "")
    expected_sha256 = _claimed_sha256(sha256, request.headers.get(CONTENT_DIGEST))
    if content_type.lower().startswith("multipart/"):
        form = StreamingForm(request.stream(), boundary_of(content_type))
        part = await form.until_file()
        fields = form.fields
        chosen_name = fields.get("name") or name or part.filename or DEFAULT_NAME
        field_ttl = _parse_ttl(fields.get("ttl_seconds"))
        # Query values are checked even where a form field wins over them.
        if ttl_seconds is not None:
            service.expiry_for(ttl_seconds, service.clock())
        if name is not None:
            validate_name(name)
        validate_mime(mime_type)
        artifact = await service.create_artifact(
            caller,
            form.file_data(),
            name=chosen_name,
            mime_type=fields.get("mime_type") or mime_type or _declared_type(part.content_type),
            ttl_seconds=field_ttl if field_ttl is not None else ttl_seconds,
            expected_sha256=expected_sha256,
        )
    else:
        artifact = await service.create_artifact(
            caller,
            request.stream(),
            name=name if name is not None else DEFAULT_NAME,
            mime_type=mime_type or _declared_type(content_type),
            ttl_seconds=ttl_seconds,
            expected_size=declared_length(request),
            expected_sha256=expected_sha256,
        )
    out = artifact_out(artifact, await base_url(request))
    # What FastAPI sends for the response model: its JSON, then the headers the endpoint set.
    response = Response(out.model_dump_json(by_alias=True), status_code=201, media_type="application/json")
    response.headers.raw.append((b"location", f"/v1/artifacts/{artifact.id}".encode("latin-1")))
    return response


class UploadRoute(Route):
    """The single-request upload outside FastAPI's routing and dependency resolution.

    Placed ahead of the FastAPI routes, it takes ``POST /v1/artifacts`` only (a ``GET`` of the path, the
    listing, falls through to them). Authentication, the parameters' validation and its problem answer, the
    error table, quota and the audit line are the same code as the FastAPI endpoint's; the middleware (request
    id, access line, metrics, CORS, body guards) wraps it as it wraps every route.
    """

    def __init__(self) -> None:
        super().__init__(UPLOAD_PATH, serve_upload, methods=["POST"], include_in_schema=False)

    def matches(self, scope: StarletteScope) -> tuple[Match, StarletteScope]:
        match, child_scope = super().matches(scope)
        if match is not Match.FULL:
            return Match.NONE, {}
        # The route template for the metrics and the access line, as FastAPI's routes set it.
        child_scope["route"] = self
        return match, child_scope


@router.get("", response_model=ArtifactPage, summary="List artifacts, newest first (keyset cursor)")
async def list_artifacts(
    service: ServiceDep,
    caller: CallerDep,
    base: BaseUrlDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
) -> ArtifactPage:
    page = await service.list_artifacts(caller, limit=limit, cursor=cursor)
    return ArtifactPage(items=[artifact_out(item, base) for item in page.items], next_cursor=page.next_cursor)


@router.get("/{artifact_id}", response_model=ArtifactOut, summary="Artifact metadata and its resource_link")
async def get_artifact(
    artifact_id: str, service: ServiceDep, caller: CallerDep, base: BaseUrlDep
) -> ArtifactOut:
    return artifact_out(await service.get_artifact(caller, artifact_id), base)


@router.patch(
    "/{artifact_id}",
    response_model=ArtifactOut,
    openapi_extra=json_body_openapi(UpdateArtifactRequest),
    summary="Change the TTL or pin",
)
async def update_artifact(
    request: Request,
    artifact_id: str,
    service: ServiceDep,
    settings: SettingsDep,
    caller: CallerDep,
    base: BaseUrlDep,
) -> ArtifactOut:
    body = await read_json(request, UpdateArtifactRequest, settings.max_json_body)
    given = body.model_fields_set
    pinned: bool = UNSET
    if "pinned" in given:
        if body.pinned is None:
            raise InvalidRequest("pinned must be true or false")
        pinned = body.pinned
    artifact = await service.update_artifact(
        caller,
        artifact_id,
        ttl_seconds=body.ttl_seconds if "ttl_seconds" in given else UNSET,
        pinned=pinned,
    )
    return artifact_out(artifact, base)


@router.delete("/{artifact_id}", status_code=204, summary="Delete an artifact")
async def delete_artifact(artifact_id: str, service: ServiceDep, caller: CallerDep) -> Response:
    await service.delete_artifact(caller, artifact_id)
    return Response(status_code=204)


_DOWNLOAD_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "The whole artifact", "content": {"application/octet-stream": {}}},
    206: {"description": "Partial content (one range, a window, or multipart/byteranges)"},
    304: {"description": "Not modified (If-None-Match / If-Modified-Since)"},
    307: {
        "description": "With BLOBSTORE_S3_PRESIGN_DOWNLOADS: Location is a presigned S3 URL of the content",
        "headers": {"Location": {"schema": {"type": "string"}}},
    },
    416: {"description": "Range not satisfiable, or too many ranges"},
}


@router.get(
    CONTENT_PATH.removeprefix("/v1/artifacts"),
    summary="Download the bytes: full, Range (single or multiple), or an offset/length window",
    responses=_DOWNLOAD_RESPONSES,
    response_class=Response,
    operation_id="download_content",
)
@router.head(
    CONTENT_PATH.removeprefix("/v1/artifacts"),
    summary="Headers of the same download without the body",
    responses=_DOWNLOAD_RESPONSES,
    response_class=Response,
    operation_id="head_content",
)
async def download_content(
    request: Request,
    artifact_id: str,
    service: ServiceDep,
    settings: SettingsDep,
    caller: CallerDep,
    offset: Annotated[str | None, Query(description="Window start (MCP window semantics)")] = None,
    length: Annotated[str | None, Query(description="Window length, clamped to the window maximum")] = None,
) -> Response:
    # ContentReads, the innermost middleware, answers every GET and HEAD of this path: this route describes
    # the operation and its parameters in the OpenAPI document.
    return await serve_content(request)


async def serve_content(request: Request, caller: Caller | None = None) -> Response:
    """``GET``/``HEAD`` of an artifact's content, read straight off the request (no dependency resolution);
    for the request's own caller, or for ``caller`` when the route decided who it is (a signed link)."""
    started = time.monotonic()
    state = app_state(request.app)
    service, settings = state.service, state.settings
    if caller is None:
        caller = await get_caller(request)
    method, headers = request.method, first_values(request.scope["headers"])
    query: dict[str, str] = {}
    if request.scope["query_string"]:
        params = request.query_params
        query = {key: value for key in ("offset", "length") if (value := params.get(key)) is not None}
    may_redirect = settings.s3_presign_downloads
    # Only nginx sets this request header (deploy/nginx-single.conf): a client that sends it straight to the
    # server gets its own empty answer and the path of nginx's internal location, never another's bytes.
    accel = settings.accel_redirect if headers.get("x-sendfile-type") == "X-Accel-Redirect" else None

    def choose(artifact: Artifact) -> tuple[DownloadPlan, tuple[int, int] | None]:
        plan = plan_download(
            method,
            headers,
            query,
            representation(artifact),
            max_ranges=settings.max_ranges,
            max_window=settings.mcp_window_max,
        )
        if method != "GET" or (may_redirect and redirectable(method, headers, plan)):
            return plan, None
        return plan, read_at_once(plan, settings.mcp_window_max)

    found = await service.read_range(caller, request.path_params["artifact_id"], choose)
    artifact, blob, plan = found.artifact, found.blob, found.plan
    redirect = None
    if may_redirect:
        redirect = await presigned_redirect(service, artifact, blob, plan, method=method, headers=headers)
    response = redirect or await build_download(
        service, artifact, blob, plan, head=method == "HEAD", data=found.data, accel=accel
    )
    if method == "GET" and response.status_code != 304:
        extra: dict[str, str | int | float | None] | None = None
        if redirect is None and found.data is not None:
            size = len(found.data)  # the whole body, read with the lookup (no header to look through)
        elif redirect is not None or ACCEL_REDIRECT in response.headers:
            size = plan.ranges[0].length if plan.ranges else artifact.size
            extra = {"redirect": "s3"} if redirect else {"sent_by": "nginx"}
        else:
            size = int(response.headers.get("content-length", "0"))
        service.audit.record(
            actor=caller.actor,
            namespace=caller.namespace,
            action="read",
            result="ok",
            artifact_id=artifact.id,
            size=size,
            mime_type=artifact.mime_type,
            duration_ms=int((time.monotonic() - started) * 1000),
            extra=extra,
        )
    return response


_READ_METHODS = frozenset({"GET", "HEAD"})
_CONTENT_PREFIX, _CONTENT_SUFFIX = CONTENT_PATH.split("{artifact_id}")


class ContentReads:
    """The hot read path: ``GET`` and ``HEAD`` of an artifact's content, answered ahead of the whole stack.

    It is the app's outermost layer (:class:`~blobstore.api.app.BlobstoreAPI`) and does, for these requests,
    what the layers it passes by would: the message guard's and the request guard's checks (a request with a
    control character in a header or a body framing goes to the stack, which answers it as before, and so
    does every request while CORS is on), the request id, metrics and access line (:class:`Observe`), the
    error table (:func:`on_blobstore_error`) and the server-error handler. Authentication, scopes,
    conditional requests, ranges and the audit line are :func:`serve_content`'s, as for the route. Any other
    request, and any other method on this path (so a 405 is what it was), goes on to the app. It saves the
    work of nine ASGI layers, the router and FastAPI's request machinery: docs/performance.md has the figures.
    """

    def __init__(self, app: ASGIApp, *, settings: Settings, guard: RequestGuard, observe: Observe) -> None:
        self.app = app
        self.guard = guard
        self.observe = observe
        # With CORS on, every answer carries the CORS layer's headers (``Vary: Origin`` at least): the stack
        # answers. Under a root path, the router's matching does.
        self.direct = not settings.cors_origins

    async def __call__(self, scope: StarletteScope, receive: Receive, send: Send) -> None:
        if self.direct and scope["type"] == "http" and scope["method"] in _READ_METHODS:
            artifact_id = _content_id(scope["path"]) if not scope.get("root_path") else None
            if artifact_id is not None and _plain(scope["headers"]):
                await self._serve(scope, receive, send, artifact_id)
                return
        await self.app(scope, receive, send)

    async def _serve(self, scope: StarletteScope, receive: Receive, send: Send, artifact_id: str) -> None:
        request_id, token = begin_request(scope)
        started = time.perf_counter()
        answer = Answer(send, request_id)
        try:
            scope["path_params"] = {"artifact_id": artifact_id}
            request = Request(scope, receive, answer)
            try:
                refusal = self.guard.refusal(scope)
                if refusal is not None:
                    raise refusal
                response = await serve_content(request)
            except BlobstoreError as exc:
                response = await on_blobstore_error(request, exc)
            except Exception as exc:
                if answer.head_sent:
                    raise
                response = await on_unexpected(request, exc)
            await response(scope, receive, answer)
        finally:
            end_request(token)
            elapsed = time.perf_counter() - started
            self.observe.account(scope, request_id, CONTENT_PATH, answer.status, elapsed, 0, answer.bytes_out)


def _plain(headers: list[tuple[bytes, bytes]]) -> bool:
    """Nothing in the head that a layer passed by would act on: no body framing, no control character."""
    for name, value in headers:
        if CONTROL.search(value) is not None:
            return False
        if name == b"transfer-encoding" or (name == b"content-length" and value != b"0"):
            return False
    return True


def _content_id(path: str) -> str | None:
    """The ``{artifact_id}`` of a content path (one non-empty segment, as the route's pattern matches), else
    None."""
    if not (path.startswith(_CONTENT_PREFIX) and path.endswith(_CONTENT_SUFFIX)):
        return None
    artifact_id = path[len(_CONTENT_PREFIX) : len(path) - len(_CONTENT_SUFFIX)]
    return artifact_id if artifact_id and "/" not in artifact_id else None

"""tus 1.0.0 at ``/tus/``: core, creation, creation-with-upload, expiration, checksum and termination.

Off-the-shelf clients (tus-js-client, Uppy, tuspy) upload here unchanged. The bytes go through the chunked
upload state machine (:mod:`blobstore.tus_uploads` maps tus offsets onto fixed chunks); when the last byte
arrives the upload completes and the response names the artifact (``Blobstore-Artifact-Id`` and a ``Link`` to
it).

Errors are the usual problem+json bodies with the usual codes; only the statuses tus prescribes differ from
:mod:`blobstore.api.errors` (460 for a checksum mismatch, 410 for an aborted or expired upload, 412 and 415).
Every response carries ``Tus-Resumable``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Annotated, Any, Final

from fastapi import APIRouter, Depends, Request, Response
from fastapi.routing import APIRoute

from blobstore.api.body import declared_length
from blobstore.api.deps import BaseUrlDep, CallerDep, app_state, get_caller
from blobstore.api.errors import error_response, problem_response, status_for
from blobstore.api.headers import http_date
from blobstore.api.tus_headers import (
    CHECKSUM_ALGORITHMS,
    EXTENSIONS,
    METHOD_OVERRIDE,
    TUS_CHECKSUM_ALGORITHM,
    TUS_EXTENSION,
    TUS_MAX_SIZE,
    TUS_RESUMABLE,
    TUS_VERSION,
    TUS_VERSION_HEADER,
    UPLOAD_CHECKSUM,
    UPLOAD_DEFER_LENGTH,
    UPLOAD_EXPIRES,
    UPLOAD_LENGTH,
    UPLOAD_METADATA,
    UPLOAD_OFFSET,
    format_metadata,
    is_offset_stream,
    is_supported_version,
    metadata_sha256,
    metadata_text,
    parse_checksum,
    parse_defer_length,
    parse_metadata,
    parse_non_negative,
)
from blobstore.checksum_spool import BodyChecksum
from blobstore.errors import BlobstoreError, InvalidRequest
from blobstore.models import Artifact, Caller, Scope, UploadSession, UploadState
from blobstore.signed_targets import link_caller, signed_message
from blobstore.tus_uploads import Appended, TusProgress, TusUploads

logger = logging.getLogger("blobstore.api")

ARTIFACT_ID_HEADER: Final = "Blobstore-Artifact-Id"
DEFAULT_NAME: Final = "upload"
NAME_KEYS: Final = ("filename", "name")
MIME_KEYS: Final = ("filetype", "mime", "type")
_GONE_STATES: Final = frozenset({UploadState.ABORTED.value, UploadState.EXPIRED.value, "gone"})
_LOGGED_CODES: Final = frozenset({"internal", "corruption", "storage_unavailable"})


class TusRefusal(Exception):
    """A catalogue error answered with a status that only tus prescribes (412, 415)."""

    def __init__(self, status: int, error: BlobstoreError) -> None:
        super().__init__(error.message)
        self.status = status
        self.error = error


def tus_status(exc: BlobstoreError) -> int:
    """The error table of :mod:`blobstore.api.errors`, with the statuses the tus spec requires."""
    if exc.code == "checksum_mismatch":
        return 460  # checksum extension: "460 Checksum Mismatch"
    if exc.code == "upload_not_open" and exc.details.get("state") in _GONE_STATES:
        return 410  # expiration extension: "the Server SHOULD respond with 404 Not Found or 410 Gone"
    return status_for(exc.code)


def tus_error_response(exc: BlobstoreError, status: int | None = None) -> Response:
    if exc.code in _LOGGED_CODES:
        logger.error("tus request failed: %r", exc)
    status = status if status is not None else tus_status(exc)
    if status == status_for(exc.code):
        response: Response = error_response(exc)
    else:
        detail = exc.message if exc.message != exc.default_message else None
        response = problem_response(
            exc.code, title=type(exc).default_message, detail=detail, details=exc.details, status=status
        )
    offset = exc.details.get("offset")
    if status == 409 and isinstance(offset, int):
        # tus 1.1 (draft): a 409 carries the current offset, so a client can resume without a HEAD.
        response.headers[UPLOAD_OFFSET] = str(offset)
    if status == 412:
        response.headers[TUS_VERSION_HEADER] = TUS_VERSION
    return response


class TusRoute(APIRoute):
    """Checks ``Tus-Resumable`` first, answers errors with tus statuses and stamps ``Tus-Resumable``."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def tus_handler(request: Request) -> Response:
            try:
                if (
                    request.method == "POST"
                    and "upload_id" in request.path_params
                    and not _overrides(request)
                ):
                    # POST is an upload's method only as X-HTTP-Method-Override; otherwise it has none.
                    refused = problem_response(
                        InvalidRequest.code,
                        title="Method Not Allowed",
                        detail="POST to an upload needs X-HTTP-Method-Override: PATCH, HEAD or DELETE",
                        status=405,
                        headers={"Allow": "DELETE, HEAD, OPTIONS, PATCH"},
                    )
                    refused.headers[TUS_RESUMABLE] = TUS_VERSION
                    return refused
                # Core: the server "MUST NOT process the request" of another version; OPTIONS is exempt.
                if request.method != "OPTIONS" and not is_supported_version(
                    request.headers.get(TUS_RESUMABLE)
                ):
                    raise TusRefusal(412, InvalidRequest(f"{TUS_RESUMABLE}: {TUS_VERSION} is required"))
                response = await handler(request)
            except TusRefusal as refusal:
                response = tus_error_response(refusal.error, refusal.status)
            except BlobstoreError as exc:
                response = tus_error_response(exc)
            response.headers[TUS_RESUMABLE] = TUS_VERSION
            return response

        return tus_handler


def _overrides(request: Request) -> bool:
    return request.headers.get(METHOD_OVERRIDE, "").strip().upper() in {"PATCH", "HEAD", "DELETE"}


async def get_tus(request: Request) -> TusUploads:
    """The running store's :class:`TusUploads`: one per runtime, so requests for one upload share its lock."""
    return app_state(request.app).runtime.tus


TusDep = Annotated[TusUploads, Depends(get_tus)]


async def get_tus_caller(request: Request, upload_id: str) -> Caller:
    """The bearer token's caller, or, for a signed upload target (``?ns=&expires=&sig=``,
    :mod:`blobstore.signed_targets`), the upload's own namespace with nothing but this upload to write."""
    params = request.query_params
    if "sig" not in params:
        return await get_caller(request)
    namespace = params.get("ns") or ""
    service = app_state(request.app).service
    await service.share_links.keys.verify(
        signed_message(namespace, upload_id), params.get("expires"), params.get("sig"), now=service.clock()
    )
    return link_caller(namespace)


TusCallerDep = Annotated[Caller, Depends(get_tus_caller)]

router = APIRouter(prefix="/tus", tags=["tus"], route_class=TusRoute)


# -- metadata -----------------------------------------------------------------------------------------------


def _first(pairs: dict[str, bytes], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        text = metadata_text(pairs, key)
        if text:
            return text
    return None


def session_fields(pairs: dict[str, bytes]) -> dict[str, Any]:
    """``begin`` arguments from Upload-Metadata: name, MIME type, sha256; other pairs become user metadata."""
    known = {*NAME_KEYS, *MIME_KEYS, "sha256"}
    return {
        "name": _first(pairs, NAME_KEYS) or DEFAULT_NAME,
        "mime_type": _first(pairs, MIME_KEYS),
        "sha256": metadata_sha256(pairs["sha256"]) if pairs.get("sha256") else None,
        "metadata": {key: metadata_text(pairs, key) for key in pairs if key not in known} or None,
    }


def session_metadata(session: UploadSession) -> dict[str, bytes]:
    """The Upload-Metadata a HEAD echoes, rebuilt from what the session keeps."""
    pairs = {"filename": session.name.encode()}
    if session.mime_type:
        pairs["filetype"] = session.mime_type.encode()
    if session.declared_sha256:
        pairs["sha256"] = session.declared_sha256.encode()
    for key, value in session.metadata.items():
        if isinstance(value, str) and key not in pairs:
            pairs[key] = value.encode()
    return pairs


# -- response headers ---------------------------------------------------------------------------------------


def _progress_headers(progress: TusProgress) -> dict[str, str]:
    headers = {UPLOAD_OFFSET: str(progress.offset)}
    if progress.length is not None:
        headers[UPLOAD_LENGTH] = str(progress.length)
    if progress.session.state is UploadState.OPEN:
        headers[UPLOAD_EXPIRES] = http_date(progress.session.expires_at)
    return headers


def _artifact_headers(artifact_id: str | None, base: str) -> dict[str, str]:
    if artifact_id is None:
        return {}
    return {
        ARTIFACT_ID_HEADER: artifact_id,
        "Link": f'<{base}/v1/artifacts/{artifact_id}>; rel="related"',
    }


def _appended_headers(appended: Appended, base: str) -> dict[str, str]:
    artifact: Artifact | None = appended.artifact
    return {
        **_progress_headers(appended.progress),
        **_artifact_headers(artifact.id if artifact else None, base),
    }


def _checksum(request: Request) -> BodyChecksum | None:
    value = request.headers.get(UPLOAD_CHECKSUM)
    if value is None:
        return None
    parsed = parse_checksum(value)
    return BodyChecksum(parsed.algorithm, parsed.digest)


# -- routes -------------------------------------------------------------------------------------------------


@router.options("/", status_code=204, summary="tus discovery: version, extensions, maximum size")
@router.options("/{upload_id}", status_code=204, include_in_schema=False)
async def options(tus: TusDep) -> Response:
    return Response(
        status_code=204,
        headers={
            TUS_VERSION_HEADER: TUS_VERSION,
            TUS_EXTENSION: ",".join(EXTENSIONS),
            TUS_MAX_SIZE: str(tus.max_size),
            TUS_CHECKSUM_ALGORITHM: ",".join(CHECKSUM_ALGORITHMS),
        },
    )


@router.post("/", status_code=201, summary="tus creation (with an optional first body)")
@router.post("", status_code=201, include_in_schema=False)
async def create(request: Request, tus: TusDep, caller: CallerDep, base: BaseUrlDep) -> Response:
    headers = request.headers
    if "upload-concat" in headers:
        raise InvalidRequest("the concatenation extension is not supported")
    length_text = headers.get(UPLOAD_LENGTH)
    if length_text is None:
        defer = headers.get(UPLOAD_DEFER_LENGTH)
        if defer is not None and parse_defer_length(defer):
            raise InvalidRequest("creation-defer-length is not supported: send Upload-Length")
        raise InvalidRequest("Upload-Length is required")
    length = parse_non_negative(length_text, UPLOAD_LENGTH)
    fields = session_fields(parse_metadata(headers.get(UPLOAD_METADATA, "")))
    session = await tus.create(caller, length=length, **fields)
    location = f"/tus/{session.id}"
    if is_offset_stream(headers.get("content-type")):
        appended = await tus.append(
            caller,
            session.id,
            offset=0,
            body=request.stream(),
            content_length=declared_length(request),
            checksum=_checksum(request),
        )
        out = _appended_headers(appended, base)
    else:
        progress = await tus.progress(caller, session.id)
        artifact = await tus.finish(caller, progress) if progress.received_all else None
        out = {**_progress_headers(progress), **_artifact_headers(artifact.id if artifact else None, base)}
    out.pop(UPLOAD_LENGTH, None)
    return Response(status_code=201, headers={"Location": location, **out})


async def _head(upload_id: str, tus: TusUploads, caller: Caller, base: str) -> Response:
    progress = await tus.progress(caller, upload_id)
    artifact_id = progress.session.artifact_id
    if progress.received_all and progress.session.state is UploadState.OPEN and Scope.WRITE in caller.scopes:
        # Every byte is here but the PATCH that brought the last one ended before completing: finish now, or a
        # client that trusts the offset would never see its artifact.
        artifact_id = (await tus.finish(caller, progress)).id
        progress = await tus.progress(caller, upload_id)
    headers = {
        **_progress_headers(progress),
        UPLOAD_METADATA: format_metadata(session_metadata(progress.session)),
        "Cache-Control": "no-store",
        **_artifact_headers(artifact_id, base),
    }
    return Response(status_code=200, headers=headers)


async def _patch(request: Request, upload_id: str, tus: TusUploads, caller: Caller, base: str) -> Response:
    if not is_offset_stream(request.headers.get("content-type")):
        raise TusRefusal(415, InvalidRequest("PATCH needs Content-Type: application/offset+octet-stream"))
    offset_text = request.headers.get(UPLOAD_OFFSET)
    if offset_text is None:
        raise InvalidRequest("Upload-Offset is required")
    appended = await tus.append(
        caller,
        upload_id,
        offset=parse_non_negative(offset_text, UPLOAD_OFFSET),
        body=request.stream(),
        content_length=declared_length(request),
        checksum=_checksum(request),
    )
    return Response(status_code=204, headers=_appended_headers(appended, base))


async def _delete(upload_id: str, tus: TusUploads, caller: Caller) -> Response:
    await tus.terminate(caller, upload_id)
    return Response(status_code=204)


@router.head("/{upload_id}", summary="tus offset of an upload")
async def head(upload_id: str, tus: TusDep, caller: TusCallerDep, base: BaseUrlDep) -> Response:
    return await _head(upload_id, tus, caller, base)


@router.patch("/{upload_id}", status_code=204, summary="Append bytes at Upload-Offset")
async def patch(
    request: Request, upload_id: str, tus: TusDep, caller: TusCallerDep, base: BaseUrlDep
) -> Response:
    return await _patch(request, upload_id, tus, caller, base)


@router.delete("/{upload_id}", status_code=204, summary="tus termination: abort the upload")
async def delete(upload_id: str, tus: TusDep, caller: CallerDep) -> Response:
    return await _delete(upload_id, tus, caller)


@router.post("/{upload_id}", include_in_schema=False)
async def overridden(
    request: Request, upload_id: str, tus: TusDep, caller: CallerDep, base: BaseUrlDep
) -> Response:
    """Core: "The X-HTTP-Method-Override request header MUST be a string which MUST be interpreted as the
    request's method by the Server, if the header is presented."
    """
    method = request.headers.get(METHOD_OVERRIDE, "").strip().upper()
    if method == "PATCH":
        return await _patch(request, upload_id, tus, caller, base)
    if method == "HEAD":
        return await _head(upload_id, tus, caller, base)
    if method == "DELETE":
        return await _delete(upload_id, tus, caller)
    raise InvalidRequest("POST to an upload needs X-HTTP-Method-Override: PATCH, HEAD or DELETE")

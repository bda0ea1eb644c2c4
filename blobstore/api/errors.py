"""The one table from error codes to HTTP statuses, and the handlers that answer ``application/problem+json``.

Every error body is an RFC 9457 problem object with a stable ``code`` member::

    {"type": "urn:blobstore:problem:chunk_conflict", "title": "...", "status": 409,
     "code": "chunk_conflict", "detail": "...", ...details}

Statuses follow one rule: 400 when the request cannot be understood (malformed input, bad parameters); 422
when it is understood but its content disagrees with a claim or with the upload (checksum, digest, size, chunk
length, index past the declared size, missing chunks); 409 for state conflicts; 413/429 for limits; 5xx for
storage. Unknown exceptions are logged and answered as ``internal`` without their text.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any, Final

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.responses import JSONResponse, Response

from blobstore import metrics
from blobstore.api.observe import current_request_id
from blobstore.errors import BlobstoreError, Internal, InvalidRequest

logger = logging.getLogger("blobstore.api")

PROBLEM_JSON: Final = "application/problem+json"
PROBLEM_TYPE_PREFIX: Final = "urn:blobstore:problem:"

STATUS_BY_CODE: Final[Mapping[str, int]] = {
    "invalid_request": 400,
    "invalid_range": 400,
    "range_required": 400,
    "chunk_size_invalid": 422,
    "chunk_index_out_of_range": 422,
    "checksum_mismatch": 422,
    "digest_mismatch": 422,
    "size_mismatch": 422,
    "upload_incomplete": 422,
    # RFC 9110 §15.5.17: 416 covers both "none of the requested ranges are satisfiable" and "an excessive
    # number of small or overlapping ranges".
    "range_not_satisfiable": 416,
    "too_many_ranges": 416,
    "not_found": 404,
    "conflict": 409,
    "chunk_conflict": 409,
    "upload_not_open": 409,
    "limit_exceeded": 413,
    "too_large": 413,
    # A quota does not clear by waiting (413); open uploads do, as they complete or expire (429).
    "quota_exceeded": 413,
    "too_many_uploads": 429,
    "unauthorized": 401,
    "forbidden": 403,
    "cross_origin_refused": 403,
    # RFC 9110 §15.5.20: "The 421 (Misdirected Request) status code indicates that the request was directed
    # at a server that is unable or unwilling to produce an authoritative response for the target URI."
    "host_not_allowed": 421,
    "request_timeout": 408,
    "storage_full": 507,
    "storage_unavailable": 503,
    "corruption": 500,
    "internal": 500,
    "upstream_unavailable": 502,
    # Media views: a view of the wrong type is 415, bytes the decoder refuses are content the request
    # cannot be served from (422), a view over budget 413, a decoder past its time 504.
    "unsupported_media": 415,
    "media_invalid": 422,
    "view_too_large": 413,
    "view_timeout": 504,
    "message_refused": 502,
    # Never sent by the server: the client's own error when no answer arrives at all.
    "server_unreachable": 503,
}

# Problem members an error's details must never overwrite.
_RESERVED: Final = frozenset({"type", "title", "status", "code", "detail", "instance", "request_id"})


def status_for(code: str) -> int:
    return STATUS_BY_CODE.get(code, 500)


def problem_response(
    code: str,
    *,
    title: str,
    detail: str | None = None,
    details: Mapping[str, Any] | None = None,
    status: int | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    status = status if status is not None else status_for(code)
    body: dict[str, Any] = {
        "type": PROBLEM_TYPE_PREFIX + code,
        "title": title,
        "status": status,
        "code": code,
    }
    if detail is not None:
        body["detail"] = detail
    for key, value in (details or {}).items():
        if key not in _RESERVED:
            body[key] = jsonable_encoder(value)
    all_headers = dict(headers or {})
    request_id = current_request_id()
    if request_id is not None:
        # Also as a header here: an unhandled error is answered outside the middleware that sets it.
        body["request_id"] = request_id
        all_headers["X-Request-Id"] = request_id
    return JSONResponse(body, status_code=status, headers=all_headers, media_type=PROBLEM_JSON)


def _extra_headers(exc: BlobstoreError, status: int) -> dict[str, str]:
    headers: dict[str, str] = {}
    size = exc.details.get("size")
    if status == 416 and isinstance(size, int):
        # RFC 9110 §14.4: a 416 "SHOULD send a Content-Range header field with an unsatisfied-range value".
        headers["Content-Range"] = f"bytes */{size}"
    if status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="blobstore"'
    return headers


def error_response(exc: BlobstoreError) -> JSONResponse:
    status = status_for(exc.code)
    if exc.code == Internal.code:
        return problem_response(Internal.code, title=Internal.default_message)
    detail = exc.message if exc.message != exc.default_message else None
    return problem_response(
        exc.code,
        title=type(exc).default_message,
        detail=detail,
        details=exc.details,
        status=status,
        headers=_extra_headers(exc, status),
    )


async def on_blobstore_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, BlobstoreError)
    metrics.count_error(exc.code, getattr(exc, "operation", None))
    if exc.code in {"internal", "corruption", "storage_unavailable"}:
        logger.error("request %s failed: %r", current_request_id(), exc)
    return error_response(exc)


async def _on_validation_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    # Only the location and message: the rejected input itself may be content or a secret.
    errors = [{"loc": list(err.get("loc", ())), "msg": str(err.get("msg", ""))} for err in exc.errors()]
    return problem_response(
        InvalidRequest.code,
        title=InvalidRequest.default_message,
        detail="request parameters failed validation",
        details={"errors": errors},
    )


def allowed_methods(request: Request) -> list[str]:
    """The methods the OpenAPI document gives this path (Starlette names only the first matching route's)."""
    methods: set[str] = set()
    for template, operations in request.app.openapi().get("paths", {}).items():
        pattern = re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template))
        if re.fullmatch(pattern, request.url.path):
            methods.update(method.upper() for method in operations)
    if "GET" in methods:
        methods.add("HEAD")
    return sorted(methods)


async def _on_http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    code = {404: "not_found", 413: "too_large"}.get(exc.status_code, "invalid_request")
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        headers["Allow"] = ", ".join(allowed_methods(request))
    return problem_response(
        code,
        title=str(exc.detail),
        status=exc.status_code,
        headers=headers,
    )


async def _on_client_disconnect(_request: Request, _exc: Exception) -> Response:
    # Nobody is left to read this; the upload layers already discarded the partial chunk.
    return problem_response(InvalidRequest.code, title="client disconnected", status=400)


async def on_unexpected(_request: Request, exc: Exception) -> Response:
    logger.error("request %s failed: unhandled error", current_request_id(), exc_info=exc)
    return problem_response(Internal.code, title=Internal.default_message)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(BlobstoreError, on_blobstore_error)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(StarletteHTTPException, _on_http_exception)
    app.add_exception_handler(ClientDisconnect, _on_client_disconnect)
    app.add_exception_handler(Exception, on_unexpected)

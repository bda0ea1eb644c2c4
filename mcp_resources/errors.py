"""The one mapping from the error catalogue (:mod:`blobstore.errors`) to JSON-RPC errors.

Every store request handler is wrapped in :func:`mcp_handler`, the one point where whatever it raises becomes
the error the client receives, through :func:`to_mcp_error`: ``code`` is the JSON-RPC number,
``message`` the catalogue's safe message and ``data.reason`` the stable catalogue code, with the error's
details in camelCase beside it. Anything that is not a :class:`~blobstore.errors.BlobstoreError` is reported
as ``internal`` without its text (and logged here, so nothing is swallowed).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Final, ParamSpec, TypeVar

from mcp.shared.exceptions import MCPError
from mcp.types import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, CallToolResult, TextContent

from blobstore import metrics
from blobstore.errors import BlobstoreError, all_codes

logger = logging.getLogger("mcp_resources")

RESOURCE_NOT_FOUND_MESSAGE: Final = "Resource not found"

# 2026-07-28 (SEP-2164) made "resource not found" -32602 with data.uri; client mistakes of every other kind
# are invalid params too, so a model can read data.reason and correct the request. Server-side failures are
# -32603.
JSONRPC_CODES: Final[dict[str, int]] = {
    "invalid_request": INVALID_PARAMS,
    "invalid_range": INVALID_PARAMS,
    "range_not_satisfiable": INVALID_PARAMS,
    "range_required": INVALID_PARAMS,
    "chunk_size_invalid": INVALID_PARAMS,
    "chunk_index_out_of_range": INVALID_PARAMS,
    "checksum_mismatch": INVALID_PARAMS,
    "digest_mismatch": INVALID_PARAMS,
    "size_mismatch": INVALID_PARAMS,
    "upload_incomplete": INVALID_PARAMS,
    "not_found": INVALID_PARAMS,
    "conflict": INVALID_PARAMS,
    "chunk_conflict": INVALID_PARAMS,
    "upload_not_open": INVALID_PARAMS,
    "limit_exceeded": INVALID_PARAMS,
    "too_large": INVALID_PARAMS,
    "quota_exceeded": INVALID_PARAMS,
    "too_many_uploads": INVALID_PARAMS,
    "too_many_ranges": INVALID_PARAMS,
    "unauthorized": INVALID_REQUEST,
    "forbidden": INVALID_REQUEST,
    # Answered over HTTP before any JSON-RPC is read (blobstore.api.request_guard); mapped for completeness.
    "cross_origin_refused": INVALID_REQUEST,
    "host_not_allowed": INVALID_REQUEST,
    "request_timeout": INVALID_REQUEST,
    "storage_full": INTERNAL_ERROR,
    "storage_unavailable": INTERNAL_ERROR,
    "corruption": INTERNAL_ERROR,
    "internal": INTERNAL_ERROR,
    "upstream_unavailable": INTERNAL_ERROR,
    # Media views: the model can pick another view, another page or a shorter segment.
    "unsupported_media": INVALID_PARAMS,
    "media_invalid": INVALID_PARAMS,
    "view_too_large": INVALID_PARAMS,
    "view_timeout": INVALID_PARAMS,
    "message_refused": INTERNAL_ERROR,
    "server_unreachable": INTERNAL_ERROR,
}


def jsonrpc_code(code: str) -> int:
    """The JSON-RPC number for a catalogue code (unknown codes are internal errors)."""
    return JSONRPC_CODES.get(code, INTERNAL_ERROR)


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def error_data(exc: BlobstoreError, **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"reason": exc.code}
    data.update({camel(key): value for key, value in exc.details.items()})
    data.update({key: value for key, value in extra.items() if value is not None})
    return data


def tool_failure(exc: BlobstoreError, **extra: Any) -> CallToolResult:
    """A failure the model can act on as a tool's result: ``isError`` with ``structuredContent.error``
    (``code``, ``message`` and the error's details), the same for every tool the store answers or fronts."""
    data = error_data(exc, **extra)
    code = data.pop("reason")
    error = {"code": code, "message": exc.message, **data}
    return CallToolResult(
        content=[TextContent(text=f"Error ({code}): {exc.message}")],
        structured_content={"error": error},
        is_error=True,
    )


def to_mcp_error(exc: BaseException, *, uri: str | None = None, **extra: Any) -> MCPError:
    """Translate any exception raised while serving a request into the error the client receives."""
    if isinstance(exc, MCPError):
        return exc
    if not isinstance(exc, BlobstoreError):
        logger.error("unexpected error while serving an MCP request", exc_info=exc)
        return MCPError(INTERNAL_ERROR, "internal error", data={"reason": "internal"})
    metrics.count_error(exc.code, getattr(exc, "operation", None))
    if exc.code == "not_found" and uri is not None:
        return MCPError(INVALID_PARAMS, RESOURCE_NOT_FOUND_MESSAGE, data=error_data(exc, uri=uri, **extra))
    if exc.code == "internal" or jsonrpc_code(exc.code) == INTERNAL_ERROR:
        logger.error("storage error while serving an MCP request: %r", exc)
    return MCPError(jsonrpc_code(exc.code), exc.message, data=error_data(exc, uri=uri, **extra))


P = ParamSpec("P")
R = TypeVar("R")


def requested_uri(params: object) -> str | None:
    """The resource a request names (``resources/read``, ``resources/subscribe``), if it names one."""
    uri = getattr(params, "uri", None)
    return uri if isinstance(uri, str) else None


def mcp_handler(handler: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Wrap a request handler whose last argument is the request's params: what it raises reaches the client
    as :func:`to_mcp_error` makes it, with ``data.uri`` when the request names a resource.

    Handlers raise the catalogue's errors (or an ``MCPError`` of their own, passed on unchanged); an unknown
    exception becomes ``-32603`` with ``data.reason = "internal"`` and no text of its own.
    """

    @functools.wraps(handler)
    async def mapped(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await handler(*args, **kwargs)
        except Exception as exc:
            raise to_mcp_error(exc, uri=requested_uri(args[-1]) if args else None) from None

    return mapped


def unmapped_codes() -> set[str]:
    """Catalogue codes without an explicit JSON-RPC number (the completeness test wants none)."""
    return set(all_codes()) - set(JSONRPC_CODES)

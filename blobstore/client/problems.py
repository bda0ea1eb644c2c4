"""Turn the server's ``application/problem+json`` answers into the catalogue's errors.

The server names every failure with a stable ``code``; the client raises the catalogue class for that code, so
callers match on the same classes whether they talk to the service in process or over HTTP.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from blobstore.errors import (
    BlobstoreError,
    Internal,
    ServerUnreachable,
    StorageUnavailable,
    all_codes,
    from_os_error,
)

_CODES = all_codes()
_DETAIL_LIMIT = 300
_RESERVED = frozenset({"type", "title", "status", "code", "detail", "instance"})


def error_from_response(response: httpx.Response) -> BlobstoreError:
    """The catalogue error a failed response stands for; the body must already be read."""
    problem = _problem_body(response)
    code = problem.get("code")
    detail = problem.get("detail") or problem.get("title")
    cls = _CODES.get(code) if isinstance(code, str) else None
    if cls is None:
        cls = StorageUnavailable if response.is_server_error else Internal
    message = str(detail)[:_DETAIL_LIMIT] if detail else None
    extras = {key: value for key, value in problem.items() if key not in _RESERVED}
    return cls(message, **extras)


def _problem_body(response: httpx.Response) -> dict[str, Any]:
    if "json" not in response.headers.get("content-type", ""):
        return {}
    try:
        body = json.loads(response.content)
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def unreachable(base_url: str) -> ServerUnreachable:
    return ServerUnreachable(f"blobstore server at {base_url} is unreachable")


def local_file_error(exc: OSError) -> BlobstoreError:
    """A failure of the client's own disk: the catalogue's storage errors, saying it is local (no path)."""
    reason = exc.strerror or type(exc).__name__
    return type(from_os_error(exc))(f"local file error: {reason}")

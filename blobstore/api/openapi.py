"""The OpenAPI document, made to describe the API exactly.

FastAPI's generated document says less and more than the server does: it offers a ``422`` validation answer
in a shape the server never sends, lists query parameters as nullable, and knows nothing of the limits that
come from the settings. This module rewrites it once per app:

- every operation documents the error answers shared by all routes, ``4XX`` and ``5XX`` as
  ``application/problem+json`` (any code the catalogue maps, present and future), instead of ``422``;
- parameters that may be omitted are not ``null``: a query parameter is absent or a value;
- the limits of the settings (artifact size, chunk sizes, TTL) and the formats the server checks (SHA-256,
  window offsets) are in the schemas, so a request the schema allows is one the server accepts;
- tus requests declare the ``Tus-Resumable`` header the server requires;
- downloads answer any media type (the artifact's own).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from blobstore.api.errors import PROBLEM_JSON
from blobstore.api.tus_headers import (
    OFFSET_OCTET_STREAM,
    TUS_RESUMABLE,
    TUS_VERSION,
    UPLOAD_LENGTH,
    UPLOAD_OFFSET,
)
from blobstore.config import Settings
from blobstore.service import CURSOR_PATTERN

SHA256_PATTERN: Final = "^(sha256:)?[0-9a-fA-F]{64}$"
# blobstore.validation: 1-1024 characters, no control characters; blobstore.media: RFC 6838 type/subtype
# (parameters after ";" are dropped).
NAME_SCHEMA: Final = {"minLength": 1, "maxLength": 1024, "pattern": "^[^\\u0000-\\u001F\\u007F]+$"}
_MIME_PART: Final = "[a-zA-Z0-9][a-zA-Z0-9!#$&^_.+-]{0,126}"
MIME_SCHEMA: Final = {"pattern": f"^{_MIME_PART}/{_MIME_PART}(;.*)?$"}
DIGITS_SCHEMA: Final = {"type": "string", "pattern": "^[0-9]+$", "maxLength": 19}
# A window offset or length is a decimal number of any length (blobstore.ranges clamps or answers 416);
# a length is not 0.
OFFSET_SCHEMA: Final = {"type": "string", "pattern": "^[0-9]+$"}
LENGTH_SCHEMA: Final = {"type": "string", "pattern": "^0*[1-9][0-9]*$"}

_PROBLEM: Final = {
    "type": "object",
    "description": "RFC 9457 problem details; `code` is the stable error code of the catalogue.",
    "required": ["type", "title", "status", "code"],
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "code": {"type": "string"},
        "detail": {"type": "string"},
        "request_id": {
            "type": "string",
            "description": "the request's id, also in `X-Request-Id` and the logs",
        },
    },
    "additionalProperties": True,
}
_PROBLEM_REF: Final = {"$ref": "#/components/schemas/Problem"}
_ANY_BYTES: Final = {"*/*": {"schema": {"type": "string", "format": "binary"}}}


def _problem_response(description: str, *, head: bool) -> dict[str, Any]:
    if head:
        return {"description": description}
    return {"description": description, "content": {PROBLEM_JSON: {"schema": _PROBLEM_REF}}}


def _not_null(schema: dict[str, Any]) -> dict[str, Any]:
    """``anyOf: [X, {type: null}]`` → ``X`` (with the outer title/description kept)."""
    options = schema.get("anyOf")
    if not isinstance(options, list):
        return schema
    rest = [option for option in options if option != {"type": "null"}]
    if len(rest) != 1 or len(rest) == len(options):
        return schema
    merged = {key: value for key, value in schema.items() if key != "anyOf"}
    merged.update(rest[0])
    return merged


_STRING_RULES: Final[dict[str, dict[str, Any]]] = {
    "sha256": {"pattern": SHA256_PATTERN},
    "name": NAME_SCHEMA,
    "mime_type": MIME_SCHEMA,
}


def _tighten_properties(schema: dict[str, Any], limits: dict[str, dict[str, Any]]) -> None:
    for name, prop in list(schema.get("properties", {}).items()):
        if name in _STRING_RULES:
            prop = _with_string_rules(prop, _STRING_RULES[name])
        if name in limits:
            prop = _with_limits(prop, limits[name])
        schema["properties"][name] = prop


def _with_string_rules(prop: dict[str, Any], rules: dict[str, Any]) -> dict[str, Any]:
    options = prop.get("anyOf")
    if isinstance(options, list):
        return {**prop, "anyOf": [{**o, **rules} if o.get("type") == "string" else o for o in options]}
    return {**prop, **rules} if prop.get("type") == "string" else prop


def _with_limits(prop: dict[str, Any], limits: dict[str, Any]) -> dict[str, Any]:
    options = prop.get("anyOf")
    if isinstance(options, list):
        return {**prop, "anyOf": [{**o, **limits} if o.get("type") == "integer" else o for o in options]}
    return {**prop, **limits} if prop.get("type") == "integer" else prop


def describe(schema: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """Rewrite FastAPI's document (in place) as described in the module docstring; returns it."""
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError"):
        components.pop(unused, None)
    components["Problem"] = _PROBLEM
    size_limits = {
        "size": {"maximum": settings.max_artifact_size},
        "chunk_size": {"minimum": settings.min_chunk_size, "maximum": settings.max_chunk_size},
        "ttl_seconds": {"minimum": 1, "maximum": settings.max_ttl_seconds},
    }

    for path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            head = method == "head"
            responses: dict[str, Any] = operation.setdefault("responses", {})
            if "HTTPValidationError" in str(responses.get("422", "")):
                del responses["422"]
            for code, response in responses.items():
                if code.startswith(("4", "5")):
                    responses[code] = _problem_response(response.get("description", ""), head=head)
            responses.setdefault("4XX", _problem_response("The request was refused (see `code`)", head=head))
            responses.setdefault("5XX", _problem_response("The server or its storage failed", head=head))
            parameters = operation.get("parameters", [])
            for parameter in parameters:
                parameter["schema"] = _not_null(parameter["schema"])
                if parameter["name"] in _STRING_RULES:
                    parameter["schema"] = _with_string_rules(
                        parameter["schema"], _STRING_RULES[parameter["name"]]
                    )
                if parameter["name"] == "cursor":
                    parameter["schema"] = {
                        **parameter["schema"],
                        "type": "string",
                        "pattern": f"^{CURSOR_PATTERN.pattern}$",
                    }
                if parameter["name"] == "ttl_seconds":
                    parameter["schema"] = _with_limits(parameter["schema"], size_limits["ttl_seconds"])
                if path.endswith("/content") and parameter["name"] == "offset":
                    parameter["schema"] = {**parameter["schema"], **OFFSET_SCHEMA}
                if path.endswith("/content") and parameter["name"] == "length":
                    parameter["schema"] = {**parameter["schema"], **LENGTH_SCHEMA}
            if path.endswith("/content"):
                for code in ("200", "206"):
                    if code in responses:
                        # The artifact's own media type (or multipart/byteranges for several ranges).
                        responses[code]["content"] = _ANY_BYTES
            if path.startswith("/tus"):
                for code, response in responses.items():
                    if code.startswith(("1", "2", "3")):
                        # tus answers carry headers, never a body.
                        response.pop("content", None)
            if path.startswith("/tus") and method != "options":
                parameters.extend(_tus_headers(method, settings))
                operation["parameters"] = parameters
                if method == "patch":
                    operation["requestBody"] = {
                        "required": True,
                        "content": {OFFSET_OCTET_STREAM: {"schema": {"type": "string", "format": "binary"}}},
                    }
            _tighten_body(operation, size_limits)
    return schema


def _header(name: str, schema: dict[str, Any], description: str, *, required: bool = True) -> dict[str, Any]:
    return {"name": name, "in": "header", "required": required, "schema": schema, "description": description}


def _tus_headers(method: str, settings: Settings) -> list[dict[str, Any]]:
    headers = [
        _header(
            TUS_RESUMABLE,
            {"type": "string", "enum": [TUS_VERSION]},
            "The tus protocol version; a request without it (or with another) is answered 412",
        )
    ]
    if method == "post":
        headers.append(
            _header(
                UPLOAD_LENGTH,
                {**DIGITS_SCHEMA, "pattern": _at_most(settings.max_artifact_size)},
                f"Total size in bytes, at most {settings.max_artifact_size} (no creation-defer-length)",
            )
        )
    if method == "patch":
        headers.append(
            _header(UPLOAD_OFFSET, DIGITS_SCHEMA, "Where the bytes go; must equal the upload's offset")
        )
    return headers


def _at_most(limit: int) -> str:
    """A regex for the decimal numbers 0..limit (no leading zeros beyond one): exact for the schema."""
    text = str(limit)
    options = [f"[0-9]{{1,{len(text) - 1}}}"] if len(text) > 1 else []
    for i, digit in enumerate(text):
        if digit != "0":
            options.append(f"{text[:i]}[0-{int(digit) - 1}][0-9]{{{len(text) - i - 1}}}")
    options.append(text)
    return "^(" + "|".join(options) + ")$"


def _tighten_body(operation: dict[str, Any], limits: dict[str, dict[str, Any]]) -> None:
    for content in operation.get("requestBody", {}).get("content", {}).values():
        schema = content.get("schema")
        if isinstance(schema, dict) and "properties" in schema:
            _tighten_properties(schema, limits)
            pinned = schema["properties"].get("pinned")
            if pinned is not None:
                # PATCH: ``ttl_seconds: null`` means "never expire"; ``pinned`` is true or false, never null.
                schema["properties"]["pinned"] = _not_null(pinned)


def install_openapi(app: FastAPI, settings: Settings) -> None:
    """Serve :func:`describe`'s document at ``app.openapi_url`` (built once, on first use)."""
    built: dict[str, Any] = {}

    def openapi() -> dict[str, Any]:
        if not built:
            generated = get_openapi(
                title=app.title,
                version=app.version,
                summary=app.summary,
                routes=app.routes,
            )
            built.update(describe(generated, settings))
        return built

    setter: Callable[[], dict[str, Any]] = openapi
    app.openapi = setter  # type: ignore[method-assign]

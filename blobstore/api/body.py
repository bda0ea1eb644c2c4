"""Request bodies: JSON read under a size limit, and raw bodies passed on as streams.

JSON endpoints read their body here rather than through FastAPI's body parameters, which would buffer a
body of any size before validation; ``json_body_openapi`` keeps the documented request schema.
"""

from __future__ import annotations

from typing import Any, TypeVar

from fastapi import Request
from pydantic import BaseModel, ValidationError

from blobstore.errors import InvalidRequest, TooLarge

M = TypeVar("M", bound=BaseModel)


def declared_length(request: Request) -> int | None:
    value = request.headers.get("content-length")
    if value is None:
        return None
    if not value.isdigit():
        raise InvalidRequest("Content-Length must be a decimal number")
    return int(value)


async def read_limited(request: Request, limit: int) -> bytes:
    """The whole body, refused with ``too_large`` as soon as it passes ``limit`` bytes."""
    length = declared_length(request)
    if length is not None and length > limit:
        raise TooLarge(f"request body exceeds {limit} bytes", max_size=limit)
    parts: list[bytes] = []
    received = 0
    async for piece in request.stream():
        received += len(piece)
        if received > limit:
            raise TooLarge(f"request body exceeds {limit} bytes", max_size=limit)
        parts.append(piece)
    return b"".join(parts)


async def read_json(request: Request, model: type[M], limit: int, *, optional: bool = False) -> M:
    """Parse and validate a JSON body of at most ``limit`` bytes; an empty optional body is ``model()``."""
    raw = await read_limited(request, limit)
    if not raw.strip():
        if optional:
            return model()
        raise InvalidRequest("a JSON body is required")
    content_type = request.headers.get("content-type", "application/json").split(";", 1)[0].strip().lower()
    if content_type != "application/json" and not content_type.endswith("+json"):
        raise InvalidRequest("Content-Type must be application/json")
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        # Locations and messages only: the input may be content or a secret.
        errors = [{"loc": list(err["loc"]), "msg": err["msg"]} for err in exc.errors(include_input=False)]
        raise InvalidRequest("request body failed validation", errors=errors) from None


def json_body_openapi(model: type[BaseModel], *, required: bool = True) -> dict[str, Any]:
    """``openapi_extra`` describing a JSON request body read by :func:`read_json`."""
    schema = _inline_definitions(model.model_json_schema())
    return {
        "requestBody": {
            "required": required,
            "content": {"application/json": {"schema": schema}},
        }
    }


def _inline_definitions(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with nested models written out in place: ``openapi_extra`` adds no components they could
    refer to."""
    definitions = schema.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return resolve(definitions[ref.removeprefix("#/$defs/")])
            return {key: resolve(value) for key, value in node.items()}
        if isinstance(node, list):
            return [resolve(item) for item in node]
        return node

    resolved: dict[str, Any] = resolve(schema)
    return resolved


def raw_body_openapi(description: str) -> dict[str, Any]:
    return {
        "requestBody": {
            "required": True,
            "description": description,
            "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
        }
    }

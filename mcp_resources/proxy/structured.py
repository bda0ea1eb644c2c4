"""Payloads in ``structuredContent`` that duplicate a block the proxy offloaded: stored once, referenced.

Servers mirror their content blocks in ``structuredContent`` (the reference filesystem server's
``read_media_file`` returns ``{"content": [{"type": "image", "data": ..., "mimeType": ...}]}`` there too, and
an ``MCPServer`` tool returning a ``str`` returns ``{"result": <the text>}``), so offloading ``content`` alone
would leave the payload in the result. A payload is stored once and referenced: each string in
``structuredContent`` that is exactly an offloaded block's payload (its base64, or its text) is replaced by
the first of these that keeps the document valid under the tool's ``outputSchema`` (the first when the tool
has none):

1. the whole object holding it replaced by the ``resource_link`` block of the stored original;
2. the string replaced by the stored artifact's URI;
3. in the object holding it, the downscaled image's base64 (and its ``mimeType``) when the model got one: a
   copy of what ``content`` shows, counted against the budget as text, so only where no reference is valid.

When none validates, the payload stays where it is and a warning names the tool and the JSON pointer (never
the content); the result's budget then decides whether it must be stored whole. Strings that duplicate no
offloaded block are never touched, and neither is a document that did not validate to begin with.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from typing import Any

from jsonschema import SchemaError
from jsonschema.validators import extend, validator_for

from mcp_resources.proxy.long_values import LongString

logger = logging.getLogger("mcp_resources.proxy")

Path = tuple[str | int, ...]


def _pointer(path: Path) -> str:
    return "/" + "/".join(str(part).replace("~", "~0").replace("/", "~1") for part in path) if path else ""


def _find(node: Any, payloads: Mapping[Any, Any], path: Path = ()) -> list[Path]:
    """Paths of every string that is one of ``payloads``."""
    if isinstance(node, str | LongString):
        return [path] if node in payloads else []
    if isinstance(node, dict):
        return [found for key, value in node.items() for found in _find(value, payloads, (*path, key))]
    if isinstance(node, list):
        return [found for index, value in enumerate(node) for found in _find(value, payloads, (*path, index))]
    return []


def _get(doc: Any, path: Path) -> Any:
    for part in path:
        doc = doc[part]
    return doc


def _set(doc: Any, path: Path, value: Any) -> Any:
    if not path:
        return value
    _get(doc, path[:-1])[path[-1]] = value
    return doc


def _candidates(doc: Any, path: Path, found: Mapping[str, Any]) -> list[tuple[Path, Any]]:
    """(where, new value) replacements for the payload at ``path``, preferred first: references to the stored
    artifact, then the downscaled image's bytes (which ``content`` carries already)."""
    options: list[tuple[Path, Any]] = []
    parent_path = path[:-1]
    parent = _get(doc, parent_path) if path else None
    if isinstance(parent, dict):
        options.append((parent_path, found["link"]))
    options.append((path, found["uri"]))
    image = found.get("image")
    if isinstance(parent, dict) and image is not None:
        smaller = dict(parent)
        smaller[path[-1]] = image["data"]
        if "mimeType" in smaller:
            smaller["mimeType"] = image["mimeType"]
        options.append((parent_path, smaller))
    return options


def replace_duplicates(
    structured: Any,
    duplicates: Mapping[str | LongString, Mapping[str, Any]],
    schema: Mapping[str, Any] | None,
    *,
    tool: str,
) -> Any:
    """``structured`` with offloaded payloads replaced (see the module doc); the same object when unchanged.

    ``duplicates`` maps each offloaded payload (base64 or text) to ``{"uri", "link", "image"}``: the stored
    artifact's URI, its ``resource_link`` block, and the inline downscaled image block (or None).
    """
    if not duplicates:
        return structured
    paths = _find(structured, duplicates)
    if not paths:
        return structured
    validator: Any = None
    if schema is not None:
        try:
            cls = validator_for(schema)
            cls.check_schema(dict(schema))
            # A string too long to hold is still a string to the schema.
            checker = cls.TYPE_CHECKER.redefine(
                "string", lambda _, value: isinstance(value, str | LongString)
            )
            validator = extend(cls, type_checker=checker)(dict(schema))  # type: ignore[no-untyped-call]
        except SchemaError:
            logger.warning(
                "tool %s: its outputSchema is not a valid JSON Schema; structuredContent kept", tool
            )
            return structured
        if not validator.is_valid(structured):
            logger.warning(
                "tool %s: structuredContent does not validate against its outputSchema; kept", tool
            )
            return structured
    doc = copy.deepcopy(structured)
    changed = False
    for path in paths:
        payload = _get(structured, path)
        try:
            still_there = _get(doc, path) == payload
        except (KeyError, IndexError, TypeError):
            still_there = False
        if not still_there:
            continue  # its object was already replaced along with an earlier payload
        found = duplicates[payload]
        for where, value in _candidates(doc, path, found):
            trial = _set(copy.deepcopy(doc), where, copy.deepcopy(value))
            if validator is None or validator.is_valid(trial):
                doc = trial
                changed = True
                break
        else:
            logger.warning(
                "tool %s: the payload at structuredContent%s duplicates an offloaded block but no smaller "
                "form is valid under the tool's outputSchema; it is kept",
                tool,
                _pointer(path),
            )
    return doc if changed else structured

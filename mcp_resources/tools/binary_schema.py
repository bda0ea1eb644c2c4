"""Where a tool's ``inputSchema`` asks for binary content, and how to tell a model a handle is accepted there.

A string property marks binary content when it says ``contentEncoding: "base64"``, ``format: "byte"`` or
``"binary"``, ``contentMediaType`` or ``x-mcp-file`` (SEP-2356/SEP-2631). :func:`binary_sites` finds every
such property, also inside nested objects and arrays, behind local ``$ref`` (``#/$defs/…``,
``#/definitions/…``) and in ``anyOf``/``oneOf``/``allOf`` branches, and says which form the value takes there:
plain base64, a ``data:`` URL (``format: "uri"``/``"data-url"``, or ``x-mcp-file`` whose values are
``data:`` URIs), or text (a textual ``contentMediaType`` without an encoding). :func:`advertise_handles`
rewrites a copy of the schema for ``tools/list`` so that each such property's description says an artifact
URI is accepted and its ``maxLength``/``minLength``/``pattern`` admit one; nothing else changes, so every
value the original schema accepts, the rewritten one accepts too.

Pure functions over JSON values: no I/O, no MCP types, used by the proxy and by the embedded tool registry.
"""

from __future__ import annotations

import copy
import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from blobstore.models import ARTIFACT_URI_PREFIX
from mcp_resources.uris import MAX_URI_LENGTH

HANDLE_HINT: Final = "or an artifact URI blobstore://artifacts/{id}"
"""What a rewritten description adds (after ``"; "``), so a model knows it may pass a handle."""
HANDLE_PATTERN: Final = (
    r"^blobstore://artifacts/[A-Za-z0-9_-]+(?:/pages/[0-9]+\.(?:png|txt)|/audio|/transcript)?"
    r"(?:\?[A-Za-z0-9=&.]*)?$"
)
"""An artifact URI, a window of it (``?offset=&length=``) or a media view of it (``/pages/<n>.png``,
``/pages/<n>.txt``, ``/audio?start=&duration=``, ``/transcript?start=&duration=``, seconds with decimals):
what a widened ``pattern`` admits."""
MIN_HANDLE_LENGTH: Final = len(ARTIFACT_URI_PREFIX) + 24
"""The shortest artifact URI: ids are a 1-4 letter prefix, ``_`` and at least 22 URL-safe characters."""
FILE_PARAM_KEY: Final = "x-blobstore-file"
"""Marks the schema of a file parameter of an embedded tool (:mod:`mcp_resources.tools.file_params`), whose
artifact URIs and upload ids the tool receives as a stream rather than as inlined bytes."""

_DATA_URL_FORMATS: Final = frozenset({"uri", "uri-reference", "iri", "iri-reference", "data-url"})
_BYTE_FORMATS: Final = frozenset({"byte", "binary"})
_TEXT_TYPES: Final = frozenset({"application/json", "application/xml", "application/yaml", "image/svg+xml"})
_COMBINATORS: Final = ("anyOf", "oneOf", "allOf")
_EXCLUSIVE: Final = frozenset({"oneOf", "not", "if", "contains"})
"""Keywords under which admitting more is not only widening: a value that matches a second ``oneOf`` branch
fails it, a ``not`` refuses more, a wider ``if`` switches to ``then``, a wider ``contains`` can exceed
``maxContains``."""
_SCHEMA_MAPS: Final = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}
)
_VALUES: Final = frozenset({"enum", "const", "default", "examples"})


class Form(enum.Enum):
    """How the bytes of an artifact go into an argument."""

    BASE64 = "base64"
    DATA_URL = "data-url"
    TEXT = "text"
    PATH = "path"
    """Written to a file the tool reads; the argument is the file's path (the proxy's ``--offload-config``
    names such arguments: no schema says so)."""
    URL = "url"
    """Fetched by the tool itself from a signed download URL the argument carries (named like ``PATH``)."""


_DEFAULT_DESCRIPTIONS: Final = {
    Form.BASE64: "Base64 bytes",
    Form.DATA_URL: "A data: URL",
    Form.TEXT: "The text",
    Form.PATH: "A file path",
    Form.URL: "A URL",
}


class Step:
    """One step of a path from the arguments object to a value."""


@dataclass(frozen=True, slots=True)
class Key(Step):
    name: str


@dataclass(frozen=True, slots=True)
class Index(Step):
    """One position of a tuple-shaped array (``prefixItems``, or ``items`` given as a list)."""

    position: int


@dataclass(frozen=True, slots=True)
class EveryItem(Step):
    """Every item of an array (``items`` as one schema)."""

    skip: int = 0
    """Positions a ``prefixItems`` before it describes."""


@dataclass(frozen=True, slots=True)
class OtherKeys(Step):
    """Every key of an object that its ``properties`` do not name (``additionalProperties`` as a schema)."""

    named: frozenset[str]


@dataclass(frozen=True, slots=True)
class BinarySite:
    """A place in a tool's arguments where the schema asks for binary content."""

    path: tuple[Step, ...]
    form: Form
    file_param: bool = False
    """Inside an embedded tool's file parameter (handed to the tool as a stream, not inlined)."""


def _is_string(node: Mapping[str, Any]) -> bool:
    kind = node.get("type")
    if kind is None:
        return True
    if isinstance(kind, list):
        return "string" in kind
    return bool(kind == "string")


def _is_textual(media_type: str) -> bool:
    base = media_type.split(";", 1)[0].strip().lower()
    return base.startswith("text/") or base in _TEXT_TYPES or base.endswith(("+json", "+xml"))


def binary_form(node: Mapping[str, Any]) -> Form | None:
    """The form a schema node asks binary content in, or None when it does not ask for binary content."""
    # A fixed value (enum, const) is a choice among strings, not bytes to be supplied.
    if not _is_string(node) or "enum" in node or "const" in node:
        return None
    encoding = node.get("contentEncoding")
    base64 = isinstance(encoding, str) and encoding.lower() == "base64"
    fmt = node.get("format")
    media = node.get("contentMediaType")
    file_marker = "x-mcp-file" in node
    if not (base64 or fmt in _BYTE_FORMATS or isinstance(media, str) or file_marker):
        return None
    if fmt in _DATA_URL_FORMATS:
        return Form.DATA_URL
    if base64 or fmt in _BYTE_FORMATS:
        return Form.BASE64
    if file_marker:
        return Form.DATA_URL
    # contentMediaType without an encoding: the string is the content itself (JSON Schema 2020-12 §8.4).
    assert isinstance(media, str)
    return Form.TEXT if _is_textual(media) else Form.BASE64


def _pointer(root: Any, ref: str) -> Any:
    """The node a local ``$ref`` (``#`` or ``#/…``) points at, or None (remote refs are not followed)."""
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        return None
    node = root
    for raw in ref[2:].split("/"):
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _walk(
    root: Any, node: Any, path: tuple[Step, ...], refs: frozenset[str], file_param: bool
) -> Iterator[tuple[tuple[Step, ...], dict[str, Any], bool]]:
    """Every schema node reachable from ``node`` with the argument path it describes.

    A ``$ref`` already followed on the way here is not followed again, so recursive schemas end.
    """
    if not isinstance(node, dict):
        return
    file_param = file_param or node.get(FILE_PARAM_KEY) is True
    yield path, node, file_param
    ref = node.get("$ref")
    if isinstance(ref, str) and ref not in refs:
        yield from _walk(root, _pointer(root, ref), path, refs | {ref}, file_param)
    for key in _COMBINATORS:
        branches = node.get(key)
        if isinstance(branches, list):
            for branch in branches:
                yield from _walk(root, branch, path, refs, file_param)
    properties = node.get("properties")
    if isinstance(properties, dict):
        for name, sub in properties.items():
            yield from _walk(root, sub, (*path, Key(name)), refs, file_param)
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        named = frozenset(properties) if isinstance(properties, dict) else frozenset()
        yield from _walk(root, extra, (*path, OtherKeys(named)), refs, file_param)
    prefix = node.get("prefixItems")
    items = node.get("items")
    tuple_items = prefix if isinstance(prefix, list) else items if isinstance(items, list) else []
    for position, sub in enumerate(tuple_items):
        yield from _walk(root, sub, (*path, Index(position)), refs, file_param)
    rest = items if isinstance(items, dict) else None
    if isinstance(items, list):
        rest = node.get("additionalItems")
    if isinstance(rest, dict):
        yield from _walk(root, rest, (*path, EveryItem(len(tuple_items))), refs, file_param)


def binary_sites(schema: Mapping[str, Any] | None) -> list[BinarySite]:
    """The places in a tool's arguments where ``schema`` asks for binary content, each once.

    Where branches disagree on the form at one place (``anyOf`` of base64 and a data URL), the first branch
    wins: a value the caller sends must fit the schema either way, and the handle is the caller's choice.
    """
    if not isinstance(schema, dict):
        return []
    found: dict[tuple[Step, ...], BinarySite] = {}
    for path, node, file_param in _walk(schema, schema, (), frozenset(), False):
        form = binary_form(node)
        if form is None:
            continue
        known = found.get(path)
        if known is None:
            found[path] = BinarySite(path, form, file_param)
        elif file_param and not known.file_param:
            found[path] = BinarySite(path, known.form, True)
    return list(found.values())


def file_param_nodes(schema: Mapping[str, Any] | None) -> dict[tuple[Step, ...], dict[str, Any]]:
    """The schema node of each file parameter (marked :data:`FILE_PARAM_KEY`) by its argument path."""
    if not isinstance(schema, dict):
        return {}
    found: dict[tuple[Step, ...], dict[str, Any]] = {}
    for path, node, _file_param in _walk(schema, schema, (), frozenset(), False):
        if node.get(FILE_PARAM_KEY) is True:
            found.setdefault(path, node)
    return found


def _exclusive_nodes(root: Any) -> set[int]:
    """The schema nodes reachable (also through local ``$ref``) from under an :data:`_EXCLUSIVE` keyword.

    Raising a ``maxLength`` there could make a value the upstream's schema accepts fail the rewritten one,
    so such a node only has its description changed.
    """
    found: set[int] = set()
    seen: set[tuple[int, bool]] = set()

    def visit(node: Any, exclusive: bool) -> None:
        if isinstance(node, list):
            for item in node:
                visit(item, exclusive)
            return
        if not isinstance(node, dict) or (id(node), exclusive) in seen:
            return
        seen.add((id(node), exclusive))
        if exclusive:
            found.add(id(node))
        ref = node.get("$ref")
        if isinstance(ref, str):
            visit(_pointer(root, ref), exclusive)
        for key, sub in node.items():
            if key in _SCHEMA_MAPS and isinstance(sub, dict):
                # Names of properties or definitions, not keywords: a property called "not" is a property.
                for named in sub.values():
                    visit(named, exclusive)
            elif key not in _VALUES:
                visit(sub, exclusive or key in _EXCLUSIVE)

    visit(root, False)
    return found


def _widen(node: dict[str, Any], form: Form, *, constraints: bool = True) -> None:
    description = node.get("description")
    if isinstance(description, str) and description.strip():
        if HANDLE_HINT not in description:
            node["description"] = f"{description.rstrip().rstrip('.;')}; {HANDLE_HINT}"
    else:
        node["description"] = f"{_DEFAULT_DESCRIPTIONS[form]}; {HANDLE_HINT}"
    if not constraints:
        return
    longest = node.get("maxLength")
    if isinstance(longest, int) and longest < MAX_URI_LENGTH:
        node["maxLength"] = MAX_URI_LENGTH
    shortest = node.get("minLength")
    if isinstance(shortest, int) and shortest > MIN_HANDLE_LENGTH:
        node["minLength"] = MIN_HANDLE_LENGTH
    pattern = node.get("pattern")
    if isinstance(pattern, str) and pattern != HANDLE_PATTERN and not pattern.endswith(f"|{HANDLE_PATTERN}"):
        # Patterns are unanchored searches (JSON Schema 2020-12 §6.3.3): the alternation keeps every match.
        node["pattern"] = f"(?:{pattern})|{HANDLE_PATTERN}"


def advertise_handles(schema: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A copy of ``schema`` whose binary-content properties say, and admit, that an artifact URI is accepted.

    Only ``description``, ``maxLength``, ``minLength`` and ``pattern`` of those properties change (a shared
    ``$defs`` entry once), and only so that the URI fits; under ``oneOf``, ``not``, ``if`` or ``contains``
    only the description (see :data:`_EXCLUSIVE`). Rewriting twice changes nothing more.
    """
    if not isinstance(schema, dict):
        return None
    rewritten = copy.deepcopy(dict(schema))
    exclusive = _exclusive_nodes(rewritten)
    done: set[int] = set()
    for _path, node, _file_param in _walk(rewritten, rewritten, (), frozenset(), False):
        form = binary_form(node)
        if form is None or id(node) in done:
            continue
        done.add(id(node))
        _widen(node, form, constraints=id(node) not in exclusive)
    return rewritten


def advertise_named(schema: Mapping[str, Any] | None, forms: Mapping[str, Form]) -> dict[str, Any] | None:
    """A copy of ``schema`` whose top-level properties named in ``forms`` (or, for an array, their items)
    say, and admit, that an artifact URI is accepted, as :func:`advertise_handles` does for binary ones."""
    if not isinstance(schema, dict):
        return None
    rewritten = copy.deepcopy(dict(schema))
    properties = rewritten.get("properties")
    if not isinstance(properties, dict):
        return rewritten
    for name, form in forms.items():
        node = properties.get(name)
        if not isinstance(node, dict):
            continue
        items = node.get("items")
        if node.get("type") == "array" and isinstance(items, dict):
            node = items
        if _is_string(node):
            _widen(node, form)
    return rewritten


@dataclass(frozen=True, slots=True)
class Slot:
    """One value in an arguments object at a binary site: where it is and how to name it."""

    container: dict[str, Any] | list[Any]
    key: str | int
    name: str
    """The argument's name as a path, e.g. ``image`` or ``pages[2].scan``."""
    site: BinarySite

    @property
    def value(self) -> Any:
        return self.container[self.key]  # type: ignore[index]

    def replace(self, value: Any) -> None:
        self.container[self.key] = value  # type: ignore[index]


def _named(name: str, step: str | int) -> str:
    if isinstance(step, int):
        return f"{name}[{step}]"
    return f"{name}.{step}" if name else step


def _slots_at(value: Any, path: tuple[Step, ...], name: str) -> Iterator[tuple[Any, str | int, str]]:
    step, rest = path[0], path[1:]
    keys: list[str | int] = []
    if isinstance(value, dict):
        if isinstance(step, Key) and step.name in value:
            keys = [step.name]
        elif isinstance(step, OtherKeys):
            keys = [key for key in value if key not in step.named]
    elif isinstance(value, list):
        if isinstance(step, Index) and step.position < len(value):
            keys = [step.position]
        elif isinstance(step, EveryItem):
            keys = list(range(step.skip, len(value)))
    for key in keys:
        child = value[key]
        label = _named(name, key)
        if rest:
            yield from _slots_at(child, rest, label)
        else:
            yield value, key, label


def slots(arguments: Mapping[str, Any] | None, sites: list[BinarySite]) -> list[Slot]:
    """Every value of ``arguments`` that sits at one of ``sites`` (each place once, first site first)."""
    if not isinstance(arguments, dict):
        return []
    found: dict[tuple[int, str | int], Slot] = {}
    for site in sites:
        if not site.path:
            continue
        for container, key, name in _slots_at(arguments, site.path, ""):
            found.setdefault((id(container), key), Slot(container, key, name, site))
    return list(found.values())


__all__ = [
    "FILE_PARAM_KEY",
    "HANDLE_HINT",
    "HANDLE_PATTERN",
    "BinarySite",
    "Form",
    "Slot",
    "advertise_handles",
    "advertise_named",
    "binary_form",
    "binary_sites",
    "file_param_nodes",
    "slots",
]

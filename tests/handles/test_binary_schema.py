"""Finding the binary-content properties of a tool's inputSchema, and rewriting them to admit a handle."""

from __future__ import annotations

import base64
import copy
import re
from typing import Any

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_resources.tools.binary_schema import (
    HANDLE_HINT,
    EveryItem,
    Form,
    Index,
    Key,
    OtherKeys,
    advertise_handles,
    advertise_named,
    binary_form,
    binary_sites,
    slots,
)

HANDLE = "blobstore://artifacts/a_AAAAAAAAAAAAAAAAAAAAAAAA"
WINDOW = f"{HANDLE}?offset=0&length=10"
Validator = jsonschema.Draft202012Validator


def paths(schema: dict[str, Any]) -> dict[tuple[Any, ...], Form]:
    return {site.path: site.form for site in binary_sites(schema)}


def test_each_marker_marks_a_string_and_says_its_form() -> None:
    assert binary_form({"type": "string", "contentEncoding": "base64"}) is Form.BASE64
    assert binary_form({"type": "string", "contentEncoding": "BASE64"}) is Form.BASE64
    assert binary_form({"type": "string", "format": "byte"}) is Form.BASE64
    assert binary_form({"type": "string", "format": "binary"}) is Form.BASE64
    assert binary_form({"type": "string", "contentMediaType": "image/png"}) is Form.BASE64
    assert binary_form({"type": "string", "x-mcp-file": {}}) is Form.DATA_URL
    assert binary_form({"type": "string", "format": "uri", "x-mcp-file": {"accept": ["image/png"]}}) is (
        Form.DATA_URL
    )
    assert binary_form({"type": "string", "format": "data-url", "contentMediaType": "image/png"}) is (
        Form.DATA_URL
    )
    assert binary_form({"type": "string", "contentMediaType": "text/csv"}) is Form.TEXT
    assert binary_form({"type": "string", "contentMediaType": "application/json"}) is Form.TEXT
    assert binary_form({"type": ["string", "null"], "contentEncoding": "base64"}) is Form.BASE64


def test_plain_strings_and_other_types_are_not_binary() -> None:
    assert binary_form({"type": "string"}) is None
    assert binary_form({"type": "string", "format": "uri"}) is None
    assert binary_form({"type": "string", "description": "base64 of the image"}) is None
    assert binary_form({"type": "integer", "contentEncoding": "base64"}) is None
    assert binary_form({"type": "object", "x-mcp-file": {}}) is None
    assert binary_form({"type": "string", "contentEncoding": "base64", "enum": ["AAAA"]}) is None


def test_sites_are_found_in_nested_objects_arrays_refs_and_combinators() -> None:
    schema = {
        "type": "object",
        "$defs": {
            "Png": {"type": "string", "contentEncoding": "base64", "contentMediaType": "image/png"},
            "Page": {
                "type": "object",
                "properties": {"scan": {"$ref": "#/$defs/Png"}, "n": {"type": "integer"}},
            },
        },
        "definitions": {"Doc": {"type": "string", "format": "uri", "x-mcp-file": {}}},
        "properties": {
            "image": {"$ref": "#/$defs/Png"},
            "pages": {"type": "array", "items": {"$ref": "#/$defs/Page"}},
            "either": {"anyOf": [{"type": "null"}, {"type": "string", "format": "byte"}]},
            "one": {"oneOf": [{"$ref": "#/definitions/Doc"}, {"type": "integer"}]},
            "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"contentMediaType": "audio/wav"}]},
            "extra": {
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "additionalProperties": {"type": "string", "contentEncoding": "base64"},
            },
            "title": {"type": "string"},
        },
    }
    assert paths(schema) == {
        (Key("image"),): Form.BASE64,
        (Key("pages"), EveryItem(), Key("scan")): Form.BASE64,
        (Key("either"),): Form.BASE64,
        (Key("one"),): Form.DATA_URL,
        (Key("pair"), Index(1)): Form.BASE64,
        (Key("extra"), OtherKeys(frozenset({"name"}))): Form.BASE64,
    }


def test_recursive_schemas_end() -> None:
    schema = {
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {
                    "blob": {"type": "string", "contentEncoding": "base64"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                },
            }
        },
        "$ref": "#/$defs/Node",
    }
    assert paths(schema) == {(Key("blob"),): Form.BASE64}


def test_slots_name_each_value_at_a_site_by_its_path() -> None:
    schema = {
        "type": "object",
        "properties": {
            "pages": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"scan": {"type": "string", "contentEncoding": "base64"}},
                },
            },
            "image": {"type": "string", "contentEncoding": "base64"},
        },
    }
    arguments = {"pages": [{"scan": HANDLE}, {"other": 1}, {"scan": "AAAA"}], "title": HANDLE}
    found = slots(arguments, binary_sites(schema))
    assert [(slot.name, slot.value) for slot in found] == [
        ("pages[0].scan", HANDLE),
        ("pages[2].scan", "AAAA"),
    ]


def test_rewriting_says_a_handle_is_accepted_and_widens_only_what_refuses_one() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "image": {
                "type": "string",
                "contentEncoding": "base64",
                "description": "The PNG to check.",
                "maxLength": 40,
                "minLength": 200,
                "pattern": "^[A-Za-z0-9+/]*={0,2}$",
            },
            "bare": {"type": "string", "format": "uri", "x-mcp-file": {}},
            "title": {"type": "string", "maxLength": 10, "description": "A title."},
        },
        "required": ["image"],
    }
    original = copy.deepcopy(schema)
    rewritten = advertise_handles(schema)
    assert schema == original
    assert rewritten is not None
    image = rewritten["properties"]["image"]
    assert image["description"] == f"The PNG to check; {HANDLE_HINT}"
    assert image["maxLength"] >= len(WINDOW)
    assert image["minLength"] <= len(HANDLE)
    assert re.search(image["pattern"], HANDLE)
    assert re.search(image["pattern"], WINDOW)
    assert re.search(image["pattern"], "QUJD")
    assert rewritten["properties"]["bare"]["description"] == f"A data: URL; {HANDLE_HINT}"
    assert rewritten["properties"]["title"] == original["properties"]["title"]
    assert {k: v for k, v in rewritten.items() if k != "properties"} == {
        k: v for k, v in original.items() if k != "properties"
    }
    assert advertise_handles(rewritten) == rewritten
    Validator(rewritten).validate({"image": HANDLE, "bare": WINDOW})


def test_a_shared_definition_is_rewritten_once() -> None:
    schema = {
        "$defs": {"Png": {"type": "string", "contentEncoding": "base64", "description": "PNG"}},
        "properties": {"a": {"$ref": "#/$defs/Png"}, "b": {"$ref": "#/$defs/Png"}},
    }
    rewritten = advertise_handles(schema)
    assert rewritten is not None
    assert rewritten["$defs"]["Png"]["description"] == f"PNG; {HANDLE_HINT}"
    assert rewritten["properties"] == schema["properties"]


# -- properties --------------------------------------------------------------------------------------------

_BASE64 = st.binary(max_size=30).map(lambda b: base64.b64encode(b).decode())
_MARKERS: st.SearchStrategy[dict[str, Any]] = st.sampled_from(
    [
        {"contentEncoding": "base64"},
        {"format": "byte"},
        {"format": "binary"},
        {"contentMediaType": "image/png"},
        {"contentEncoding": "base64", "contentMediaType": "audio/wav"},
        {"x-mcp-file": {"accept": ["image/png"]}},
        {"format": "uri", "x-mcp-file": {}},
    ]
)


@st.composite
def binary_leaf(draw: st.DrawFn) -> tuple[dict[str, Any], Any, bool]:
    value = draw(_BASE64)
    node: dict[str, Any] = {"type": "string", **draw(_MARKERS)}
    if draw(st.booleans()):
        node["maxLength"] = len(value) + draw(st.integers(0, 5))
    if draw(st.booleans()):
        node["minLength"] = draw(st.integers(0, len(value)))
    if draw(st.booleans()):
        node["pattern"] = draw(
            st.sampled_from(["^[A-Za-z0-9+/]*={0,2}$", "[A-Z]*", "^(?:[A-Za-z0-9+/]{4})*"])
        )
    if draw(st.booleans()):
        node["description"] = draw(st.sampled_from(["The image.", "bytes", "Audio; WAV"]))
    return node, value, True


@st.composite
def plain_leaf(draw: st.DrawFn) -> tuple[dict[str, Any], Any, bool]:
    if draw(st.booleans()):
        text = draw(st.text(alphabet="abc", max_size=8))
        return {"type": "string", "maxLength": 8, "description": "A name."}, text, False
    return {"type": "integer"}, draw(st.integers()), False


def node_strategy(depth: int) -> st.SearchStrategy[tuple[dict[str, Any], Any, set[tuple[Any, ...]]]]:
    leaves = st.one_of(binary_leaf(), plain_leaf()).map(lambda t: (t[0], t[1], {()} if t[2] else set()))
    if depth == 0:
        return leaves

    @st.composite
    def composite(draw: st.DrawFn) -> tuple[dict[str, Any], Any, set[tuple[Any, ...]]]:
        kind = draw(st.sampled_from(["object", "array", "anyOf", "leaf"]))
        child = node_strategy(depth - 1)
        if kind == "leaf":
            return draw(leaves)
        if kind == "object":
            names = draw(st.lists(st.sampled_from(["a", "b", "c", "d"]), unique=True, min_size=1, max_size=3))
            props, value, sites = {}, {}, set()
            for name in names:
                sub, sub_value, sub_sites = draw(child)
                props[name] = sub
                value[name] = sub_value
                sites |= {(Key(name), *p) for p in sub_sites}
            return {"type": "object", "properties": props}, value, sites
        if kind == "array":
            sub, sub_value, sub_sites = draw(child)
            count = draw(st.integers(0, 2))
            return (
                {"type": "array", "items": sub},
                [copy.deepcopy(sub_value) for _ in range(count)],
                {(EveryItem(), *p) for p in sub_sites},
            )
        sub, sub_value, sub_sites = draw(child)
        return {"anyOf": [{"type": "null"}, sub]}, sub_value, sub_sites

    return composite()


@st.composite
def tool_schemas(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any], set[tuple[Any, ...]]]:
    body, value, sites = draw(node_strategy(3))
    schema: dict[str, Any] = {"type": "object", "properties": {"arg": body}}
    if draw(st.booleans()):
        # The same tree behind a $ref.
        schema = {"type": "object", "$defs": {"Arg": body}, "properties": {"arg": {"$ref": "#/$defs/Arg"}}}
    return schema, {"arg": value}, {(Key("arg"), *p) for p in sites}


def _with_handles(arguments: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    replaced = copy.deepcopy(arguments)
    for slot in slots(replaced, binary_sites(schema)):
        if isinstance(slot.value, str):
            slot.replace(WINDOW)
    return replaced


def _changed_keys(a: Any, b: Any) -> set[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        keys = {k for k in a.keys() | b.keys() if k not in a or k not in b or _leafish(a[k], b[k])}
        for k in a.keys() & b.keys():
            keys |= _changed_keys(a[k], b[k])
        return keys
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return set().union(*(_changed_keys(x, y) for x, y in zip(a, b, strict=True))) if a else set()
    return set()


def _leafish(a: Any, b: Any) -> bool:
    return not isinstance(a, dict | list) and a != b


@settings(max_examples=300, deadline=None)
@given(tool_schemas())
def test_the_walker_finds_exactly_the_binary_leaves(case: tuple[dict[str, Any], Any, set[Any]]) -> None:
    schema, _value, expected = case
    assert set(paths(schema)) == expected


@settings(max_examples=300, deadline=None)
@given(tool_schemas())
def test_a_value_the_upstream_schema_accepts_the_rewritten_one_accepts(
    case: tuple[dict[str, Any], Any, set[Any]],
) -> None:
    schema, arguments, _expected = case
    Validator(schema).validate(arguments)
    rewritten = advertise_handles(schema)
    assert rewritten is not None
    Validator(rewritten).validate(arguments)
    # And the same arguments with a handle at every binary place.
    Validator(rewritten).validate(_with_handles(arguments, schema))
    # Only what admits a handle changed, and rewriting again changes nothing.
    assert _changed_keys(schema, rewritten) <= {"description", "maxLength", "minLength", "pattern"}
    assert advertise_handles(rewritten) == rewritten
    assert paths(rewritten) == paths(schema)


def test_named_path_and_url_properties_say_a_handle_is_accepted_and_admit_one() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "maxLength": 200, "pattern": "^/"},
            "paths": {"type": "array", "items": {"type": "string", "description": "A file"}},
            "url": {"type": "string", "format": "uri", "description": "Where to fetch."},
            "count": {"type": "integer"},
            "other": {"type": "string"},
        },
    }
    forms = {"path": Form.PATH, "paths": Form.PATH, "url": Form.URL, "count": Form.PATH, "absent": Form.URL}
    rewritten = advertise_named(schema, forms)
    assert rewritten is not None
    properties = rewritten["properties"]
    assert properties["path"]["description"] == f"A file path; {HANDLE_HINT}"
    assert properties["paths"]["items"]["description"] == f"A file; {HANDLE_HINT}"
    assert properties["url"]["description"] == f"Where to fetch; {HANDLE_HINT}"
    assert properties["count"] == {"type": "integer"}
    assert properties["other"] == {"type": "string"}
    for value, name in ((HANDLE, "path"), ("/etc/hosts", "path"), ([HANDLE, "/a"], "paths"), (HANDLE, "url")):
        Validator(rewritten).validate({name: value})
    assert schema["properties"]["path"] == {"type": "string", "maxLength": 200, "pattern": "^/"}
    assert advertise_named(rewritten, forms) == rewritten


def test_a_value_that_matched_one_branch_of_a_one_of_still_matches_only_that_one() -> None:
    # Raising the base64 branch's maxLength would let a long https URL match both branches, and a oneOf
    # refuses a value that matches two.
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "image": {
                "oneOf": [
                    {"type": "string", "contentEncoding": "base64", "maxLength": 100},
                    {"type": "string", "format": "uri", "minLength": 101},
                ]
            }
        },
    }
    link = {"image": "https://example.com/" + "x" * 120}
    Validator(schema).validate(link)
    rewritten = advertise_handles(schema)
    assert rewritten is not None
    Validator(rewritten).validate(link)
    branch = rewritten["properties"]["image"]["oneOf"][0]
    assert branch["description"] == f"Base64 bytes; {HANDLE_HINT}"
    assert branch["maxLength"] == 100
    Validator(rewritten).validate({"image": HANDLE})


def test_a_definition_also_used_under_not_keeps_its_constraints() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "$defs": {"Png": {"type": "string", "contentEncoding": "base64", "maxLength": 10}},
        "properties": {
            "image": {"$ref": "#/$defs/Png"},
            "label": {"type": "string", "not": {"$ref": "#/$defs/Png"}},
        },
    }
    labelled = {"label": "a label longer than ten"}
    Validator(schema).validate(labelled)
    rewritten = advertise_handles(schema)
    assert rewritten is not None
    Validator(rewritten).validate(labelled)
    assert rewritten["$defs"]["Png"]["description"] == f"Base64 bytes; {HANDLE_HINT}"
    assert rewritten["$defs"]["Png"]["maxLength"] == 10


def test_a_widened_pattern_admits_window_and_media_view_uris() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "image": {"type": "string", "contentEncoding": "base64", "pattern": "^[A-Za-z0-9+/=]+$"}
        },
    }
    rewritten = advertise_handles(schema)
    assert rewritten is not None
    for uri in (
        HANDLE,
        WINDOW,
        f"{HANDLE}/pages/3.png",
        f"{HANDLE}/pages/12.txt",
        f"{HANDLE}/audio?start=1.5&duration=2",
        f"{HANDLE}/transcript?start=10",
    ):
        Validator(rewritten).validate({"image": uri})
    for stranger in ("https://example.com/a.png", f"{HANDLE}/../x", f"{HANDLE}/pages/1.gif"):
        assert not Validator(rewritten).is_valid({"image": stranger}), stranger


def test_a_property_named_like_a_keyword_is_widened_as_any_other() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"not": {"type": "string", "contentEncoding": "base64", "maxLength": 10}},
    }
    rewritten = advertise_handles(schema)
    assert rewritten is not None
    Validator(rewritten).validate({"not": HANDLE})

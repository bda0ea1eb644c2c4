"""The proxy's incremental JSON reader against ``json.loads``: same value for any split, same verdict."""

from __future__ import annotations

import itertools
import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_resources.proxy.json_stream import JsonError, JsonReader, Path

SHORT_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "/": "\\/",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}


def read(pieces: list[bytes], **options: Any) -> Any:
    reader = JsonReader(**options)
    for piece in pieces:
        reader.feed(piece)
    return reader.finish()


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(data)) for c in cuts})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()


def containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5)


values = st.recursive(scalars, containers, max_leaves=30)


@st.composite
def string_literal(draw: st.DrawFn, text: str) -> str:
    """``text`` as a JSON string literal, each character raw, short-escaped or ``\\u``-escaped at random."""
    out = ['"']
    for ch in text:
        how = draw(st.sampled_from(["raw", "short", "u"]))
        code = ord(ch)
        if how == "short" and ch in SHORT_ESCAPES:
            out.append(SHORT_ESCAPES[ch])
        elif how == "u" or ch in '"\\' or code < 0x20:
            if code > 0xFFFF:
                high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
                out.append(f"\\u{high:04x}\\u{low:04X}")
            else:
                out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


@settings(max_examples=300, deadline=None)
@given(
    value=values,
    ascii_only=st.booleans(),
    indent=st.sampled_from([None, 0, 2]),
    cuts=st.lists(st.integers(0, 4000)),
)
def test_any_split_of_a_document_reads_as_json_loads_reads_it(
    value: Any, ascii_only: bool, indent: int | None, cuts: list[int]
) -> None:
    data = json.dumps(value, ensure_ascii=ascii_only, indent=indent).encode()
    assert read(split(data, cuts)) == json.loads(data)


@settings(max_examples=200, deadline=None)
@given(
    data=st.data(), text=st.text(min_size=1, max_size=300), cuts=st.lists(st.integers(0, 2000), max_size=30)
)
def test_long_strings_with_every_kind_of_escape_read_the_same_in_any_split(
    data: st.DataObject, text: str, cuts: list[int]
) -> None:
    literal = data.draw(string_literal(text))
    doc = ('{"a":[1,' + literal + "]," + literal + ":" + literal + "}").encode()
    expected = json.loads(doc)
    assert read(split(doc, cuts)) == expected

    taken: list[tuple[Path, list[str]]] = []

    class Collect:
        def __init__(self, path: Path) -> None:
            self.parts: list[str] = []
            taken.append((path, self.parts))

        def write(self, piece: str) -> None:
            self.parts.append(piece)

        def finish(self) -> Any:
            return "".join(self.parts)

        def abort(self) -> None:
            raise AssertionError("a complete document aborts no sink")

    assert read(split(doc, cuts), long_strings=Collect, long_at=0) == expected
    # Keys are never handed to a sink: only the two values, by their paths.
    assert [path for path, _ in taken] == [("a", 1), (text,)]


@settings(max_examples=500, deadline=None)
@given(
    text=st.text(
        alphabet=st.sampled_from(list('{}[]:,"\\/ntrufalseNaIiy0123456789-+.eEu\t\n x\u00e9')), max_size=40
    ),
    cut=st.integers(0, 40),
)
def test_arbitrary_text_is_rejected_exactly_when_json_loads_rejects_it(text: str, cut: int) -> None:
    try:
        expected = json.loads(text)
    except (ValueError, RecursionError):
        with pytest.raises(JsonError) as caught:
            read(split(text.encode(), [cut]))
        assert 0 <= caught.value.offset <= len(text.encode())
        return
    got = read(split(text.encode(), [cut]))
    assert got == expected or (isinstance(got, float) and math.isnan(got) and math.isnan(expected))


@settings(max_examples=300, deadline=None)
@given(value=values, position=st.integers(0, 10_000), byte=st.integers(0, 255), cut=st.integers(0, 10_000))
def test_a_corrupted_document_gets_the_verdict_of_json_loads(
    value: Any, position: int, byte: int, cut: int
) -> None:
    data = bytearray(json.dumps(value).encode())
    data.insert(position % (len(data) + 1), byte)
    try:
        expected = json.loads(bytes(data).decode("utf-8"))
    except (ValueError, RecursionError):
        with pytest.raises(JsonError):
            read(split(bytes(data), [cut]))
        return
    assert read(split(bytes(data), [cut])) == expected


@pytest.mark.parametrize(
    ("text", "reason", "offset"),
    [
        (b'{"a": 1,}', "expected a property name in double quotes", 8),
        (b"[1, 2", "unexpected end of the text", 5),
        (b'{"a" 1}', "expected ':'", 5),
        (b'["abc', "unterminated string", 1),
        (b'"a\\x"', "invalid escape", 2),
        (b'"\\u12g4"', "invalid \\u escape", 1),
        (b'"a\x01"', "control character in a string", 2),
        (b'"\xff"', "invalid UTF-8 in a string", 1),
        (b"[1] 2", "extra data after the value", 4),
        (b"[tru]", "expected a value", 1),
        (b"[1}", "mismatched bracket", 2),
        (b"", "unexpected end of the text", 0),
    ],
)
def test_invalid_json_names_the_reason_and_the_byte(text: bytes, reason: str, offset: int) -> None:
    with pytest.raises(JsonError) as caught:
        read([text])
    assert (caught.value.reason, caught.value.offset) == (reason, offset)
    assert str(caught.value) == f"{reason} at byte {offset}"


def test_lone_and_paired_surrogate_escapes_read_as_json_loads_reads_them() -> None:
    for text in ['"\\ud800"', '"\\ud83d\\ude00"', '"\\udc00\\ud800x"', '"\\ud800\\u0041"']:
        data = text.encode()
        for cut in range(len(data) + 1):
            assert read(split(data, [cut])) == json.loads(text)


def test_nan_and_infinities_are_read_as_json_loads_reads_them() -> None:
    got = read([b"[NaN, Infinity, -", b"Infinity]"])
    assert math.isnan(got[0])
    assert got[1:] == [math.inf, -math.inf]


def test_nesting_past_the_depth_limit_is_refused() -> None:
    with pytest.raises(JsonError, match="nesting deeper than 8"):
        read([b"[" * 9 + b"]" * 9], max_depth=8)
    assert read([b"[" * 8 + b"]" * 8], max_depth=8) == json.loads("[" * 8 + "]" * 8)


def test_a_discarded_document_keeps_its_top_level_scalars_and_still_checks_its_end() -> None:
    reader = JsonReader()
    reader.feed(b'{"result": {"content": [{"data": "AAAA')
    reader.discard()
    reader.feed(b'AAAA"}]}, "jsonrpc": "2.0", "id": "bp-1"}')
    assert reader.finish() == {"jsonrpc": "2.0", "id": "bp-1"}
    broken = JsonReader()
    broken.feed(b'{"result": [1, 2')
    broken.discard()
    with pytest.raises(JsonError, match="mismatched bracket at byte 19"):
        broken.feed(b", 3}")

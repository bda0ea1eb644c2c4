"""Range, If-Range, entity-tag and window semantics (RFC 9110), checked against an independent oracle."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from blobstore.errors import InvalidRange, RangeNotSatisfiable
from blobstore.ranges import (
    BEYOND_ANY_SIZE,
    ByteRange,
    RangeSpec,
    coalesce,
    if_range_matches,
    none_match,
    parse_etags,
    parse_range_header,
    parse_window_params,
    resolve_ranges,
    strong_etag,
    window,
)

SIZE = 10_000

# RFC 9110 §14.1.2, every example, on a 10000-byte representation: (header, resolved [start, end) ranges).
RFC_EXAMPLES = [
    ("bytes=0-499", [(0, 500)]),  # "The first 500 bytes"
    ("bytes=500-999", [(500, 1000)]),  # "The second 500 bytes"
    ("bytes=-500", [(9500, 10_000)]),  # "The final 500 bytes", suffix form
    ("bytes=9500-", [(9500, 10_000)]),  # "The final 500 bytes", open-ended form
    ("bytes=0-0,-1", [(0, 1), (9999, 10_000)]),  # "The first and last bytes only"
    ("bytes=500-600,601-999", [(500, 1000)]),  # "valid (but not canonical)" second 500 bytes
    ("bytes=500-700,601-999", [(500, 1000)]),  # the same, overlapping
]


@pytest.mark.parametrize(("header", "expected"), RFC_EXAMPLES)
def test_rfc9110_examples_resolve_to_the_documented_bytes(
    header: str, expected: list[tuple[int, int]]
) -> None:
    specs = parse_range_header(header)
    assert specs is not None
    resolved = coalesce(resolve_ranges(specs, SIZE))
    assert [(r.start, r.end) for r in resolved] == expected


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("bytes=0-", [(0, SIZE)]),
        ("bytes=-20000", [(0, SIZE)]),  # §14.1.1: a suffix longer than the representation selects all of it
        ("bytes=9990-20000", [(9990, SIZE)]),  # last-pos past the end means "to the end"
        ("BYTES = 1-2", [(1, 3)]),  # the unit is case-insensitive, whitespace around tokens is tolerated
        ("bytes=1-2,,", [(1, 3)]),  # empty list elements are ignored (§5.6.1)
        ("bytes=99999-,0-0", [(0, 1)]),  # an unsatisfiable spec among satisfiable ones is dropped
    ],
)
def test_edge_forms_resolve(header: str, expected: list[tuple[int, int]]) -> None:
    specs = parse_range_header(header)
    assert specs is not None
    assert [(r.start, r.end) for r in coalesce(resolve_ranges(specs, SIZE))] == expected


@pytest.mark.parametrize("header", ["bytes=10000-", "bytes=10000-10005", "bytes=-0", "bytes=20000-,30000-"])
def test_unsatisfiable_sets_raise_with_the_size(header: str) -> None:
    specs = parse_range_header(header)
    assert specs is not None
    with pytest.raises(RangeNotSatisfiable) as caught:
        resolve_ranges(specs, SIZE)
    assert caught.value.details["size"] == SIZE


@pytest.mark.parametrize(
    "header",
    [
        "bytes",
        "bytes=",
        "bytes=5-4",
        "bytes=a-b",
        "bytes=-",
        "bytes=1-2-3",
        "bytes=+1-2",
        "bytes=0x10-",
        "bytes=1",
    ],
)
def test_malformed_byte_ranges_are_invalid(header: str) -> None:
    with pytest.raises(InvalidRange):
        parse_range_header(header)


def test_other_units_are_ignored() -> None:
    assert parse_range_header("items=0-5") is None


def test_huge_numerals_are_invalid_rather_than_overflowing() -> None:
    # §14.1.2: recipients "MUST anticipate potentially large decimal numerals".
    with pytest.raises(InvalidRange):
        parse_range_header("bytes=0-" + "9" * 40)


# -- property tests against an independent oracle -----------------------------------------------------------

spec_strategy = st.one_of(
    st.tuples(st.integers(0, 3 * SIZE), st.none()),
    st.tuples(st.integers(0, 3 * SIZE), st.integers(0, 3 * SIZE)).map(lambda t: (min(t), max(t))),
    st.tuples(st.none(), st.integers(0, 3 * SIZE)),
)
spaces = st.sampled_from(["", " ", "  ", "\t"])


def render(spec: tuple[int | None, int | None]) -> str:
    first, last = spec
    return f"{'' if first is None else first}-{'' if last is None else last}"


def oracle_bytes(spec: tuple[int | None, int | None], size: int) -> set[int]:
    first, last = spec
    if first is None:
        assert last is not None
        return set(range(max(0, size - last), size)) if last > 0 else set()
    stop = size if last is None else min(last + 1, size)
    return set(range(first, stop))


@given(st.lists(spec_strategy, min_size=1, max_size=12), spaces)
def test_parse_round_trips_every_spec(specs: list[tuple[int | None, int | None]], space: str) -> None:
    header = "bytes=" + f",{space}".join(render(spec) for spec in specs)
    assert parse_range_header(header) == [RangeSpec(first, last) for first, last in specs]


@given(st.lists(spec_strategy, min_size=1, max_size=12), st.integers(0, 2 * SIZE))
def test_resolved_and_coalesced_ranges_cover_exactly_the_requested_bytes(
    specs: list[tuple[int | None, int | None]], size: int
) -> None:
    wanted: set[int] = set().union(*(oracle_bytes(spec, size) for spec in specs))
    parsed = parse_range_header("bytes=" + ",".join(render(spec) for spec in specs))
    assert parsed is not None
    if not wanted:
        with pytest.raises(RangeNotSatisfiable):
            resolve_ranges(parsed, size)
        return
    merged = coalesce(resolve_ranges(parsed, size))
    covered: set[int] = set()
    for item in merged:
        covered.update(range(item.start, item.end))
    assert covered == wanted
    # Ascending, disjoint and not even adjacent: nothing is sent twice and no part could be merged further.
    assert all(a.end < b.start for a, b in itertools.pairwise(merged))
    assert all(0 <= item.start < item.end <= size for item in merged)


def parsed_or_refused(value: str) -> list[RangeSpec] | str | None:
    try:
        return parse_range_header(value)
    except InvalidRange as exc:
        return f"refused: {exc}"


@given(
    st.text("0123456789", min_size=1, max_size=21),
    st.text("0123456789", max_size=21),
    st.sampled_from([" ", "\t", "  "]),
    st.sampled_from(["bytes", "BYTES", "Bytes"]),
)
def test_the_usual_single_range_reads_as_its_spelled_out_forms(
    first: str, last: str, space: str, unit: str
) -> None:
    # "bytes=first-last" is read by one match; with a space or another case of the unit the general parse
    # reads it: both give the same specs, or the same refusal (a last before the first, a 20-digit numeral).
    plain = parsed_or_refused(f"bytes={first}-{last}")
    assert plain == parsed_or_refused(f"{unit}={space}{first}-{last}{space}")
    assert plain == parsed_or_refused(f"bytes={first}{space}-{space}{last}")


@given(st.text(max_size=60))
def test_arbitrary_text_is_parsed_or_refused_never_crashes(value: str) -> None:
    try:
        result = parse_range_header(value)
    except InvalidRange:
        return
    assert result is None or all(isinstance(spec, RangeSpec) for spec in result)


@given(st.integers(0, 3 * SIZE), st.one_of(st.none(), st.integers(1, 3 * SIZE)), st.integers(0, 2 * SIZE))
def test_window_is_the_clamped_slice(offset: int, length: int | None, size: int) -> None:
    max_window = 1024
    if offset > size:
        with pytest.raises(RangeNotSatisfiable):
            window(offset, length, size, max_window)
        return
    win = window(offset, length, size, max_window)
    limit = max_window if length is None else min(length, max_window)
    assert (win.offset, win.length) == (offset, min(limit, size - offset))
    assert win.eof == (offset + win.length >= size)


@pytest.mark.parametrize(("offset", "length"), [("-1", None), ("1.5", None), (None, "x"), ("", None)])
def test_window_params_must_be_plain_digits(offset: str | None, length: str | None) -> None:
    with pytest.raises(InvalidRange):
        parse_window_params(offset, length)


@given(st.integers(0, 10**40), st.integers(0, 30))
def test_window_params_of_any_number_of_digits_are_numbers(value: int, zeros: int) -> None:
    text = "0" * zeros + str(value)
    expected = value if value < 10**19 else BEYOND_ANY_SIZE
    assert parse_window_params(text, text) == (expected, expected)


@given(st.integers(10**19, 10**60), st.integers(1, 2 * SIZE), st.integers(0, 2 * SIZE))
def test_a_huge_length_is_clamped_and_a_huge_offset_is_past_the_end(
    huge: int, size: int, offset: int
) -> None:
    max_window = 1024
    parsed_offset, parsed_length = parse_window_params(str(min(offset, size)), str(huge))
    assert window(parsed_offset, parsed_length, size, max_window) == window(
        min(offset, size), max_window, size, max_window
    )
    far, _ = parse_window_params(str(huge), None)
    with pytest.raises(RangeNotSatisfiable):
        window(far, None, size, max_window)


def test_a_numeral_of_thousands_of_digits_is_read_without_converting_it() -> None:
    # int() refuses strings of more than 4300 digits; the parser never gets there.
    assert parse_window_params("9" * 100_000, "0" * 100_000 + "7") == (BEYOND_ANY_SIZE, 7)


def test_zero_length_window_is_invalid() -> None:
    with pytest.raises(InvalidRange):
        window(0, 0, SIZE, 1024)


def test_content_range_uses_an_inclusive_last_position() -> None:
    assert ByteRange(500, 1000).content_range(SIZE) == "bytes 500-999/10000"


# -- validators ----------------------------------------------------------------------------------------------

DIGEST = "ab" * 32
ETAG = strong_etag(DIGEST)


def test_strong_etag_is_quoted_and_not_weak() -> None:
    assert ETAG == '"sha256-' + DIGEST + '"'


@pytest.mark.parametrize(
    ("header", "matches"),
    [
        (ETAG, True),
        (f"W/{ETAG}", True),  # §13.1.2: If-None-Match uses the weak comparison
        (f'"other", {ETAG}', True),
        ("*", True),
        ('"other"', False),
    ],
)
def test_if_none_match(header: str, matches: bool) -> None:
    assert none_match(header, ETAG) is matches


@pytest.mark.parametrize(
    ("header", "matches"),
    [
        (ETAG, True),
        (f"W/{ETAG}", False),  # §13.1.5: If-Range uses the strong comparison, so a weak tag never matches
        ('"sha256-other"', False),
        ("Sun, 06 Nov 1994 08:49:37 GMT", True),  # exact match with Last-Modified
        ("Sun, 06 Nov 1994 08:49:38 GMT", False),
    ],
)
def test_if_range(header: str, matches: bool) -> None:
    assert if_range_matches(header, ETAG, "Sun, 06 Nov 1994 08:49:37 GMT") is matches


def test_malformed_entity_tags_are_refused() -> None:
    with pytest.raises(InvalidRange):
        parse_etags("not-quoted")

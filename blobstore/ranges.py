"""Byte ranges: value types and sans-I/O parsing of ``Range``, ``If-Range`` and entity tags (RFC 9110).

No I/O and no status codes here: the HTTP edge maps :class:`~blobstore.errors.InvalidRange` and
:class:`~blobstore.errors.RangeNotSatisfiable` to its responses, and the MCP edge uses :func:`window` for the
same offset/length semantics.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from blobstore.errors import InvalidRange, RangeNotSatisfiable


@dataclass(frozen=True, slots=True)
class ByteRange:
    """A resolved, satisfiable range: bytes ``[start, end)`` of a representation of known size."""

    start: int
    end: int

    @property
    def length(self) -> int:
        return self.end - self.start

    def content_range(self, size: int) -> str:
        # RFC 9110 §14.4: "Content-Range: bytes 42-1233/1234" — last-pos is inclusive.
        return f"bytes {self.start}-{self.end - 1}/{size}"


@dataclass(frozen=True, slots=True)
class RangeSpec:
    """One unresolved ``range-spec``: ``first-last``, ``first-`` (last None) or a suffix ``-length``."""

    first: int | None
    last: int | None

    def resolve(self, size: int) -> ByteRange | None:
        """The satisfiable part of this spec for a representation of ``size`` bytes, or None."""
        if self.first is None:
            # RFC 9110 §14.1.1: "If the selected representation is shorter than the specified suffix-length,
            # the entire representation is used." A zero suffix-length is unsatisfiable.
            assert self.last is not None
            if self.last == 0 or size == 0:
                return None
            return ByteRange(max(0, size - self.last), size)
        # RFC 9110 §14.1.1: "An int-range is satisfiable if first-pos is less than the current length" and
        # "if the last-pos value is absent, or if the value is greater than or equal to the current length of
        # the representation data, the byte range is interpreted as the remainder of the representation".
        if self.first >= size:
            return None
        end = size if self.last is None or self.last >= size - 1 else self.last + 1
        return ByteRange(self.first, end)


_DIGITS = re.compile(r"[0-9]{1,19}")
_RANGE_UNIT = "bytes"
_ONE_RANGE = re.compile(r"bytes=([0-9]{1,19})-([0-9]{0,19})")
"""The usual value, one ``first-last`` or ``first-`` with no space: read by one match (the general parse
below gives the same specs for it, and takes every other form)."""


def parse_range_header(value: str) -> list[RangeSpec] | None:
    """Parse a ``Range`` header value.

    Returns None for a range unit other than ``bytes`` (RFC 9110 §14.2: "A server MUST ignore a Range header
    field received with a request method that is unrecognized or for which range handling is not defined" and
    unknown units are ignored likewise). Raises :class:`InvalidRange` for a syntactically invalid ``bytes``
    range set; the HTTP edge may then ignore the header, as §14.2 permits ("MAY ignore").
    """
    one = _ONE_RANGE.fullmatch(value)
    if one is not None:
        first_text, last_text = one.groups()
        first = int(first_text)
        last = int(last_text) if last_text else None
        if last is not None and last < first:
            raise InvalidRange("last-pos is less than first-pos")
        return [RangeSpec(first, last)]
    unit, sep, ranges = value.partition("=")
    if not sep:
        raise InvalidRange("Range header has no '='")
    if unit.strip().lower() != _RANGE_UNIT:
        return None
    specs: list[RangeSpec] = []
    for raw in ranges.split(","):
        item = raw.strip()
        if not item:
            # RFC 9110 §5.6.1: list elements may be empty ("1#element" allows empty elements to be ignored).
            continue
        first_text, dash, last_text = item.partition("-")
        first_text, last_text = first_text.strip(), last_text.strip()
        if not dash:
            raise InvalidRange("range-spec has no '-'")
        if not first_text:
            if not _DIGITS.fullmatch(last_text):
                raise InvalidRange("suffix-range needs a length")
            specs.append(RangeSpec(None, int(last_text)))
            continue
        if not _DIGITS.fullmatch(first_text) or (last_text and not _DIGITS.fullmatch(last_text)):
            raise InvalidRange("range positions must be decimal digits")
        first = int(first_text)
        last = int(last_text) if last_text else None
        # RFC 9110 §14.1.1: "A range request is invalid if ... last-pos value ... is less than the first-pos."
        if last is not None and last < first:
            raise InvalidRange("last-pos is less than first-pos")
        specs.append(RangeSpec(first, last))
    if not specs:
        raise InvalidRange("empty range set")
    return specs


def resolve_ranges(specs: list[RangeSpec], size: int) -> list[ByteRange]:
    """Resolve specs against ``size``; drop unsatisfiable ones; raise if none is left.

    RFC 9110 §15.5.17: 416 is for when "the set of ranges requested has been rejected ... because none of the
    requested ranges are satisfiable".
    """
    if len(specs) == 1:
        one = specs[0].resolve(size)
        resolved = [] if one is None else [one]
    else:
        resolved = [r for r in (spec.resolve(size) for spec in specs) if r is not None]
    if not resolved:
        raise RangeNotSatisfiable(size=size)
    return resolved


def coalesce(ranges: list[ByteRange]) -> list[ByteRange]:
    """Merge overlapping or adjacent ranges (in ascending order).

    RFC 9110 §14.2: "A server that supports range requests MAY ignore or reject a Range header field that
    contains ... many small ranges ... or ranges that overlap" — merging is the gentle reading, and stops a
    client from multiplying the response size with overlapping ranges.
    """
    if len(ranges) < 2:
        return list(ranges)
    merged: list[ByteRange] = []
    for item in sorted(ranges, key=lambda r: r.start):
        if merged and item.start <= merged[-1].end:
            last = merged[-1]
            merged[-1] = ByteRange(last.start, max(last.end, item.end))
        else:
            merged.append(item)
    return merged


@dataclass(frozen=True, slots=True)
class Window:
    """An offset/length read window (MCP ``resources/read`` and ``?offset=&length=``)."""

    offset: int
    length: int
    size: int

    @property
    def end(self) -> int:
        return self.offset + self.length

    @property
    def eof(self) -> bool:
        return self.end >= self.size


def window(offset: int | None, length: int | None, size: int, max_window: int) -> Window:
    """Clamp a requested window to ``[offset, min(offset+length, size))`` and at most ``max_window`` bytes.

    ``offset == size`` is a valid empty window at end of file; ``offset > size`` is not satisfiable. A missing
    length means "as much as allowed"; negative values or a zero length are invalid.
    """
    start = 0 if offset is None else offset
    if start < 0:
        raise InvalidRange("offset must be >= 0")
    if length is not None and length <= 0:
        raise InvalidRange("length must be > 0")
    if start > size:
        raise RangeNotSatisfiable(size=size)
    wanted = max_window if length is None else min(length, max_window)
    return Window(start, min(wanted, size - start), size)


_ANY_DIGITS = re.compile(r"[0-9]+")
BEYOND_ANY_SIZE = 10**19
"""What a window value of more than 19 significant digits stands for: past any size the store can hold (and
past a signed 64-bit integer), so a ``length`` clamps like any long one and an ``offset`` is past the end."""


def parse_window_params(offset: str | None, length: str | None) -> tuple[int | None, int | None]:
    """Parse decimal ``offset``/``length`` query values; anything but plain digits is ``InvalidRange``.

    Any number of digits is a number: a huge ``length`` is clamped and a huge ``offset`` is past the end
    (:func:`window`), exactly as a merely large one. Values beyond 19 significant digits are read as
    :data:`BEYOND_ANY_SIZE` rather than converted, so no numeral costs more than its scan.
    """

    def one(name: str, text: str | None) -> int | None:
        if text is None:
            return None
        if not _ANY_DIGITS.fullmatch(text):
            raise InvalidRange(f"{name} must be a non-negative decimal integer")
        significant = text.lstrip("0") or "0"
        return int(significant) if len(significant) <= 19 else BEYOND_ANY_SIZE

    return one("offset", offset), one("length", length)


# -- entity tags -------------------------------------------------------------------------------------------

_ETAG = re.compile(r'\s*(W/)?"([\x21\x23-\x7e\x80-\xff]*)"\s*')


def strong_etag(sha256_hex: str) -> str:
    """A strong validator: the content digest never changes for an artifact, so it is byte-exact."""
    return f'"sha256-{sha256_hex}"'


def parse_etags(value: str) -> list[tuple[bool, str]] | None:
    """Parse ``If-None-Match``/``If-Match``: a list of ``(weak, opaque)`` or None for ``*``."""
    if value.strip() == "*":
        return None
    tags: list[tuple[bool, str]] = []
    for part in value.split(","):
        if not part.strip():
            continue
        match = _ETAG.fullmatch(part)
        if match is None:
            raise InvalidRange("malformed entity-tag")
        tags.append((match.group(1) is not None, match.group(2)))
    return tags


def none_match(if_none_match: str, etag: str) -> bool:
    """True when ``If-None-Match`` matches ``etag`` (so a GET answers 304).

    RFC 9110 §13.1.2: "A recipient MUST use the weak comparison function when comparing entity tags for
    If-None-Match".
    """
    tags = parse_etags(if_none_match)
    if tags is None:
        return True
    opaque = etag.strip('"')
    return any(tag == opaque for _weak, tag in tags)


def if_range_matches(if_range: str, etag: str, last_modified_http: str | None) -> bool:
    """Evaluate ``If-Range``: True means "send the range", False means "send the whole representation".

    RFC 9110 §13.1.5: "the recipient MUST use the strong comparison function when comparing entity tags for
    If-Range" and a date validator matches only on an exact match with Last-Modified.
    """
    value = if_range.strip()
    if value.startswith('"') or value.startswith("W/"):
        match = _ETAG.fullmatch(value)
        if match is None or match.group(1):
            return False
        return match.group(2) == etag.strip('"')
    return last_modified_http is not None and value == last_modified_http

"""Deciding what a download answers, from the request headers alone (no I/O).

:func:`plan_download` turns ``Range``, ``If-Range``, ``If-None-Match``, ``If-Modified-Since`` and the
``offset``/``length`` query window into a :class:`DownloadPlan`; the route then streams what the plan says.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum

from blobstore.api.headers import parse_http_date
from blobstore.errors import InvalidRange, RangeNotSatisfiable, TooManyRanges
from blobstore.ranges import (
    ByteRange,
    Window,
    coalesce,
    if_range_matches,
    none_match,
    parse_range_header,
    parse_window_params,
    resolve_ranges,
    window,
)

MAX_RANGE_SPECS = 1000
"""Specs read from one Range header before it is refused outright, whatever ``max_ranges`` is."""


class Outcome(Enum):
    FULL = "full"
    NOT_MODIFIED = "not_modified"
    PARTIAL = "partial"
    MULTIPART = "multipart"
    WINDOW = "window"


@dataclass(frozen=True, slots=True)
class DownloadPlan:
    outcome: Outcome
    ranges: list[ByteRange] = field(default_factory=list)
    window: Window | None = None


@dataclass(frozen=True, slots=True)
class Representation:
    """The validators and size of what is being downloaded."""

    size: int
    etag: str
    last_modified: datetime
    last_modified_http: str


def _not_modified(headers: Mapping[str, str], rep: Representation) -> bool:
    if_none_match = headers.get("if-none-match")
    if if_none_match is not None:
        # RFC 9110 §13.2.2 step 3: If-None-Match is evaluated and If-Modified-Since is then ignored.
        try:
            return none_match(if_none_match, rep.etag)
        except InvalidRange:
            return False
    since = headers.get("if-modified-since")
    if since is not None:
        moment = parse_http_date(since)
        return moment is not None and rep.last_modified.replace(microsecond=0) <= moment
    return False


def _ranges(value: str, rep: Representation, max_ranges: int) -> list[ByteRange] | None:
    """Resolved, coalesced ranges; None when the header is to be ignored and the whole body sent."""
    if rep.size == 0:
        # RFC 9110 §14.1.1: for a zero-length representation no int-range is satisfiable, and §14.2 lets a
        # server ignore Range; a 200 with an empty body serves every client.
        return None
    if value.count(",") >= MAX_RANGE_SPECS:
        raise TooManyRanges(size=rep.size, max_ranges=max_ranges)
    try:
        specs = parse_range_header(value)
    except InvalidRange:
        # RFC 9110 §14.2: "A server MAY ignore the Range header field." A malformed one is ignored like an
        # unknown unit, rather than failing the whole download.
        return None
    if specs is None:
        return None
    resolved = coalesce(resolve_ranges(specs, rep.size))
    if len(resolved) > max_ranges:
        raise TooManyRanges(size=rep.size, max_ranges=max_ranges)
    return resolved


def plan_download(
    method: str,
    headers: Mapping[str, str],
    query: Mapping[str, str],
    rep: Representation,
    *,
    max_ranges: int,
    max_window: int,
) -> DownloadPlan:
    """What to answer for a GET or HEAD of an artifact's content.

    Raises ``RangeNotSatisfiable`` / ``TooManyRanges`` (416) and ``InvalidRange`` (400, bad query window).
    """
    if method not in {"GET", "HEAD"}:
        return DownloadPlan(Outcome.FULL)
    if _not_modified(headers, rep):
        return DownloadPlan(Outcome.NOT_MODIFIED)
    if "offset" in query or "length" in query:
        offset, length = parse_window_params(query.get("offset"), query.get("length"))
        return DownloadPlan(Outcome.WINDOW, window=window(offset, length, rep.size, max_window))
    range_value = headers.get("range")
    if range_value is None:
        return DownloadPlan(Outcome.FULL)
    if_range = headers.get("if-range")
    # RFC 9110 §13.1.5: "If the validator does not match, the server MUST ignore the Range header field".
    if if_range is not None and not if_range_matches(if_range, rep.etag, rep.last_modified_http):
        return DownloadPlan(Outcome.FULL)
    try:
        ranges = _ranges(range_value, rep, max_ranges)
    except RangeNotSatisfiable:
        raise RangeNotSatisfiable(size=rep.size) from None
    if ranges is None:
        return DownloadPlan(Outcome.FULL)
    if len(ranges) == 1:
        return DownloadPlan(Outcome.PARTIAL, ranges=ranges)
    return DownloadPlan(Outcome.MULTIPART, ranges=ranges)

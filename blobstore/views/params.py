"""The views' parameters as the edges receive them (``"1,4,9-10"``, ``"x,y,w,h"``), parsed and bounded."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Final, Literal

from blobstore.errors import InvalidRequest, NotFound

PageFormat = Literal["text", "image", "both", "ocr"]
FramesLayout = Literal["frames", "sheet"]
FramesMode = Literal["scenes", "even"]
FRAMES_MODES: Final = ("scenes", "even")
PAGE_FORMATS: Final = ("text", "image", "both", "ocr")
MAX_FRAMES: Final = 8
MIN_EDGE: Final = 16
MAX_EDGE: Final = 4096
"""Long-edge budgets a caller may ask for: a page or frame is never rendered larger than 4096 px."""

_RANGE = re.compile(r"\s*(\d{1,7})\s*(?:-\s*(\d{1,7})\s*)?")


def parse_pages(spec: str, max_pages: int) -> tuple[int, ...]:
    """``"7"``, ``"3-5"``, ``"1,4,9-10"``: 1-based page numbers in the order given, each once, at most
    ``max_pages`` of them."""
    pages: list[int] = []
    for item in spec.split(","):
        match = _RANGE.fullmatch(item)
        if match is None:
            raise InvalidRequest(f"pages must look like '7', '3-5' or '1,4,9-10', not {spec[:40]!r}")
        first = int(match.group(1))
        last = int(match.group(2) or first)
        if first < 1 or last < first:
            raise InvalidRequest("pages are numbered from 1, and a range must not run backwards")
        if last - first + 1 > max_pages:
            raise InvalidRequest(f"at most {max_pages} pages per read", max_pages=max_pages)
        for page in range(first, last + 1):
            if page not in pages:
                pages.append(page)
        if len(pages) > max_pages:
            raise InvalidRequest(f"at most {max_pages} pages per read", max_pages=max_pages)
    return tuple(pages)


def check_pages_exist(pages: tuple[int, ...], total: int) -> None:
    """Every page is one of the document's ``total``. A page past the last names no resource, on HTTP
    (``/pages/43.txt``) as on MCP (``…/pages/43.txt``, or ``pages="43"``): ``not_found`` with the page
    count, so the caller can ask for one that exists."""
    past = [page for page in pages if page > total]
    if past:
        raise NotFound(f"the PDF has {total} pages; page {past[0]} does not exist", pages=total)


def parse_page(text: str) -> int:
    """One page number of a URI or path (``pages/7.txt``)."""
    if not text.isdigit() or int(text) < 1 or len(text) > 7:
        raise InvalidRequest("a page number is a whole number from 1")
    return int(text)


def parse_region(spec: str) -> tuple[int, int, int, int]:
    """``"x,y,w,h"`` in the original's pixels: non-negative offsets, positive sizes."""
    parts = [part.strip() for part in spec.split(",")]
    if len(parts) != 4 or not all(part.isdigit() and len(part) <= 7 for part in parts):
        raise InvalidRequest("region must be 'x,y,w,h': four whole numbers of pixels")
    x, y, w, h = (int(part) for part in parts)
    if w == 0 or h == 0:
        raise InvalidRequest("a region's width and height must be positive")
    return x, y, w, h


def check_edge(max_edge: int) -> int:
    if not MIN_EDGE <= max_edge <= MAX_EDGE:
        raise InvalidRequest(f"max_edge must be between {MIN_EDGE} and {MAX_EDGE} pixels")
    return max_edge


def check_segment(start: float, duration: float, max_seconds: float) -> tuple[float, float]:
    """A segment's start and length, rounded to milliseconds; at most ``max_seconds`` long."""
    if not start >= 0:
        raise InvalidRequest("start_seconds must be 0 or more")
    if not duration > 0:
        raise InvalidRequest("duration_seconds must be positive")
    if duration > max_seconds:
        raise InvalidRequest(f"a segment is at most {max_seconds:g} s long", max_audio_seconds=max_seconds)
    return round(start, 3), round(duration, 3)


def check_frames(count: int) -> int:
    if not 1 <= count <= MAX_FRAMES:
        raise InvalidRequest(f"frames must be between 1 and {MAX_FRAMES}")
    return count


def _number(name: str, value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise InvalidRequest(f"{name} must be a number of seconds") from None
    if not math.isfinite(number):
        raise InvalidRequest(f"{name} must be a number of seconds")
    return number


def parse_window_query(path: Mapping[str, str], query: str) -> dict[str, Any]:
    """``start`` and ``duration`` of an audio segment's or a transcript's URI (``?start=40&duration=30``)."""
    from urllib.parse import unquote  # here, not in the worker, which never reads a URI

    given: dict[str, str] = {}
    for item in query.split("&") if query else []:
        key, _, value = item.partition("=")
        if key not in {"start", "duration"} or key in given:
            raise InvalidRequest("this URI takes start and duration, each at most once")
        given[key] = unquote(value)
    start = _number("start", given["start"]) if "start" in given else 0.0
    duration = _number("duration", given["duration"]) if "duration" in given else None
    return {"start": start, "duration": duration}

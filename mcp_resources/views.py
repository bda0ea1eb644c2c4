"""Media views on the MCP edge: the ``read_artifact`` view arguments and the page and audio resources.

The views themselves (decoding, limits, the cache) are :mod:`blobstore.views`; this module turns them into
content blocks and resource contents. Every tool answer is ``[text saying what it is, the view's blocks,
text saying how to read the next piece]``. Its page texts and binary blocks share one budget, the larger of
the inline limit and the window maximum (a view is bounded by its own limits already: ten pages, 30 s, eight
frames); a block past it becomes a ``resource_link`` to the view's own URI, which ``resources/read`` returns
whole.
"""

from __future__ import annotations

import base64
import math
import re
from dataclasses import dataclass
from typing import Any, Final, Literal
from urllib.parse import unquote

from mcp.types import (
    AudioContent,
    CallToolResult,
    ContentBlock,
    ImageContent,
    ResourceLink,
    ResourceTemplate,
    TextContent,
)

from blobstore.errors import InvalidRequest
from blobstore.models import ARTIFACT_URI_PREFIX, Artifact, Caller
from blobstore.views.cache import View
from blobstore.views.describe import (
    next_pages_hint,
    next_segment_hint,
    page_list,
    pages_line,
    seconds,
    segment_line,
)
from blobstore.views.engine import MediaViews, Source, distinct_frames
from blobstore.views.params import (
    FramesLayout,
    PageFormat,
    check_edge,
    parse_page,
    parse_pages,
    parse_region,
)
from mcp_resources.content import estimate_audio_tokens, estimate_image_tokens, estimate_text_tokens

PAGE_TEXT_TEMPLATE: Final = "blobstore://artifacts/{artifact_id}/pages/{page}.txt"
PAGE_IMAGE_TEMPLATE: Final = "blobstore://artifacts/{artifact_id}/pages/{page}.png"
AUDIO_TEMPLATE: Final = "blobstore://artifacts/{artifact_id}/audio{?start,duration}"

_VIEW_PATH = re.compile(
    r"(?P<id>[A-Za-z0-9_-]{1,200})/(?:pages/(?P<page>[^/?]{1,8})\.(?P<ext>txt|png)|audio)"
)


@dataclass(frozen=True, slots=True)
class ViewRef:
    """A parsed view URI."""

    artifact_id: str
    kind: Literal["page_text", "page_image", "audio"]
    page: int = 0
    start: float = 0.0
    duration: float | None = None
    max_edge: int | None = None
    """A page image's long-edge budget, when not the server's (``…/pages/7.png?max_edge=300``)."""


def page_uri(artifact_id: str, page: int, ext: Literal["txt", "png"], max_edge: int | None = None) -> str:
    edge = f"?max_edge={max_edge}" if max_edge is not None and ext == "png" else ""
    return f"{ARTIFACT_URI_PREFIX}{artifact_id}/pages/{page}.{ext}{edge}"


def audio_uri(artifact_id: str, start: float, duration: float) -> str:
    return f"{ARTIFACT_URI_PREFIX}{artifact_id}/audio?start={start:g}&duration={duration:g}"


def first_view_uri(artifact: Artifact, max_audio_seconds: float = 30.0) -> str | None:
    """The view resource to read first, for hosts that read resources but call no tools: page 1's text of a
    PDF (its image when the PDF has no text layer), the first segment of audio or video; None otherwise
    (and for a PDF or recording whose facts are unknown)."""
    media = artifact.media or {}
    if media.get("pages"):
        return page_uri(artifact.id, 1, "txt" if media.get("text_layer") else "png")
    duration = media.get("duration_seconds")
    if (
        artifact.mime_type.startswith(("audio/", "video/"))
        and isinstance(duration, int | float)
        and duration > 0
    ):
        return audio_uri(artifact.id, 0, round(min(max_audio_seconds, duration), 3))
    return None


def _number(name: str, value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise InvalidRequest(f"{name} must be a number of seconds") from None
    if not math.isfinite(number):
        raise InvalidRequest(f"{name} must be a number of seconds")
    return number


def parse_view_uri(uri: str) -> ViewRef | None:
    """A page or audio view URI, or None for any other URI (an artifact, a window, a stranger)."""
    if not uri.startswith(ARTIFACT_URI_PREFIX) or len(uri) > 2048:
        return None
    path, _, query = uri[len(ARTIFACT_URI_PREFIX) :].partition("?")
    match = _VIEW_PATH.fullmatch(path)
    if match is None:
        return None
    if match.group("page") is not None:
        kind: Literal["page_text", "page_image"] = (
            "page_text" if match.group("ext") == "txt" else "page_image"
        )
        edge: int | None = None
        if query:
            # A page image may name the size it was read at (the link of one over an answer's budget).
            key, _, value = query.partition("=")
            if kind != "page_image" or key != "max_edge" or not value.isdigit() or len(value) > 5:
                raise InvalidRequest("a page URI takes no query parameters but a page image's max_edge")
            edge = check_edge(int(value))
        return ViewRef(match.group("id"), kind, page=parse_page(match.group("page")), max_edge=edge)
    values: dict[str, str] = {}
    for item in query.split("&") if query else []:
        key, _, value = item.partition("=")
        if key not in {"start", "duration"} or key in values:
            raise InvalidRequest("an audio URI takes start and duration, each at most once")
        values[key] = unquote(value)
    start = _number("start", values["start"]) if "start" in values else 0.0
    duration = _number("duration", values["duration"]) if "duration" in values else None
    return ViewRef(match.group("id"), "audio", start=start, duration=duration)


def view_templates(*, long_edge: int = 1024, max_audio_seconds: float = 30.0) -> list[ResourceTemplate]:
    """The page and audio templates, stating this server's budgets (a model reads the numbers)."""
    return [
        ResourceTemplate(
            name="artifact-page-text",
            title="PDF page text",
            uri_template=PAGE_TEXT_TEMPLATE,
            mime_type="text/plain",
            description="The text layer of one page of a PDF artifact (pages count from 1), as UTF-8 text. "
            "Empty for a page without a text layer: read its image instead.",
        ),
        ResourceTemplate(
            name="artifact-page-image",
            title="PDF page image",
            uri_template=PAGE_IMAGE_TEMPLATE,
            mime_type="image/png",
            description="One page of a PDF artifact rendered as PNG, its longer side at most the server's "
            f"long-edge budget ({long_edge} px; ?max_edge=N for another).",
        ),
        ResourceTemplate(
            name="artifact-audio",
            title="Audio segment",
            uri_template=AUDIO_TEMPLATE,
            mime_type="audio/wav",
            description="A segment of an audio or video artifact as 16 kHz mono PCM WAV: start and duration "
            f"in seconds (default 0 and the longest segment, {max_audio_seconds:g} s).",
        ),
    ]


@dataclass(frozen=True, slots=True)
class ViewContents:
    """What a view URI reads as: text or bytes, their type, and the facts for ``_meta``."""

    mime_type: str
    text: str | None
    data: bytes | None
    meta: dict[str, Any]
    source: Source


async def read_view_uri(views: MediaViews, caller: Caller, ref: ViewRef) -> ViewContents:
    if ref.kind == "audio":
        source = await views.open(caller, ref.artifact_id, kinds=("audio", "video"))
        view = await views.audio(source, ref.start, ref.duration)
        return ViewContents("audio/wav", None, view.data, view.meta, source)
    source = await views.open(caller, ref.artifact_id, kinds=("pdf",))
    total = await views.page_count(source, (ref.page,))
    if ref.kind == "page_text":
        (text,) = await views.page_texts(source, (ref.page,))
        meta = {**text.meta, "pages": total}
        return ViewContents("text/plain", text.data.decode("utf-8"), None, meta, source)
    image = await views.page_image(source, ref.page, ref.max_edge)
    return ViewContents("image/png", None, image.data, image.meta, source)


# -- read_artifact --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ViewArgs:
    """The view arguments of ``read_artifact`` (all None: a plain byte read)."""

    pages: str | None = None
    page_format: PageFormat = "text"
    start_seconds: float | None = None
    duration_seconds: float | None = None
    frames: int | None = None
    frames_layout: FramesLayout = "frames"
    region: str | None = None
    max_edge: int | None = None

    @property
    def asked(self) -> bool:
        # A page_format or frames_layout other than its default asks for a view too, so that it is refused
        # without its pages or frames rather than ignored by a byte read.
        return (
            self.page_format != "text"
            or self.frames_layout != "frames"
            or any(
                value is not None
                for value in (
                    self.pages,
                    self.start_seconds,
                    self.duration_seconds,
                    self.frames,
                    self.region,
                    self.max_edge,
                )
            )
        )


class _Budget:
    """The bytes of binary blocks an answer may still carry."""

    def __init__(self, limit: int) -> None:
        self.left = limit

    def take(self, data: bytes) -> bool:
        if len(data) > self.left:
            return False
        self.left -= len(data)
        return True


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _image_block(view: View, budget: _Budget, link_uri: str | None, name: str) -> ContentBlock | None:
    if budget.take(view.data):
        return ImageContent(data=_b64(view.data), mime_type=view.mime_type)
    if link_uri is None:
        return None
    return ResourceLink(
        uri=link_uri,
        name=name,
        mime_type=view.mime_type,
        size=len(view.data),
        description="over this answer's inline budget: read it with resources/read",
    )


async def view_result(
    views: MediaViews, caller: Caller, artifact_id: str, args: ViewArgs, *, budget: int
) -> CallToolResult:
    """The answer to a ``read_artifact`` call with view arguments."""
    families = {
        "pages": args.pages is not None,
        "segment": args.start_seconds is not None or args.duration_seconds is not None,
        "frames": args.frames is not None,
        "region": args.region is not None,
    }
    chosen = [name for name, given in families.items() if given]
    if len(chosen) > 1:
        raise InvalidRequest(f"ask for one view per call, not {' and '.join(chosen)}")
    if args.pages is None and args.page_format != "text":
        raise InvalidRequest(f'page_format="{args.page_format}" applies to pages: add pages, e.g. pages="1"')
    if args.frames is None and args.frames_layout != "frames":
        raise InvalidRequest(
            f'frames_layout="{args.frames_layout}" applies to frames: add frames, e.g. frames=6'
        )
    left = _Budget(budget)
    if args.pages is not None:
        return await _pages_result(views, caller, artifact_id, args, left)
    if chosen == ["segment"]:
        return await _segment_result(views, caller, artifact_id, args, left)
    if args.frames is not None:
        return await _frames_result(views, caller, artifact_id, args, left)
    return await _image_result(views, caller, artifact_id, args, left)


async def _pages_result(
    views: MediaViews, caller: Caller, artifact_id: str, args: ViewArgs, budget: _Budget
) -> CallToolResult:
    assert args.pages is not None
    pages = parse_pages(args.pages, views.max_pages)
    source = await views.open(caller, artifact_id, kinds=("pdf",))
    total = await views.page_count(source, pages)
    read = await views.pages(source, pages, args.page_format, args.max_edge)
    name = source.artifact.name
    what = {"text": "text layer", "image": "page images", "both": "text layer and page images"}
    blocks: list[ContentBlock] = []
    tokens = 0
    fallbacks: list[int] = []
    ocr_pages: list[int] = []
    for page in read:
        if page.text is not None and page.text_layer and not budget.take(page.text.encode("utf-8")):
            # Text counts against the answer's budget like any block: past it, the page's text resource.
            blocks.append(
                TextContent(
                    text=f"--- page {page.page} of {total} ---\n(its text is over this answer's inline "
                    "budget: read the link with resources/read)"
                )
            )
            blocks.append(
                ResourceLink(
                    uri=page_uri(source.artifact.id, page.page, "txt"),
                    name=f"{name} page {page.page}",
                    mime_type="text/plain",
                    size=len(page.text.encode("utf-8")),
                )
            )
        elif page.text is not None and page.text_layer:
            blocks.append(TextContent(text=f"--- page {page.page} of {total} ---\n{page.text}"))
            tokens += estimate_text_tokens(page.text)
        elif page.text is not None and page.ocr:
            ocr_pages.append(page.page)
            blocks.append(
                TextContent(
                    text=f"--- page {page.page} of {total} (no text layer: OCR text) ---\n{page.text}"
                )
            )
            tokens += estimate_text_tokens(page.text)
        elif page.text is not None:
            fallbacks.append(page.page)
            blocks.append(
                TextContent(
                    text=f"--- page {page.page} of {total} ---\n(no text layer on this page"
                    + (", and OCR read nothing on it" if views.ocr else " and no OCR installed")
                    + ": its image follows)"
                )
            )
        if page.image is not None:
            link = page_uri(source.artifact.id, page.page, "png", args.max_edge)
            block = _image_block(page.image, budget, link, f"{name} page {page.page}")
            if block is not None:
                blocks.append(block)
                if isinstance(block, ImageContent):
                    tokens += estimate_image_tokens(page.image.meta["width"], page.image.meta["height"])
    head = pages_line(name, pages, total, what[args.page_format])
    if ocr_pages:
        head += (
            f"; page {ocr_pages[0]} has no text layer: its text is what OCR read"
            if len(ocr_pages) == 1
            else f"; pages {page_list(ocr_pages)} have no text layer: their text is what OCR read"
        )
    if fallbacks:
        head += (
            f"; page {fallbacks[0]} has no text layer and is shown as an image"
            if len(fallbacks) == 1
            else f"; pages {page_list(fallbacks)} have no text layer and are shown as images"
        )
    head += f"; about {tokens} tokens."
    tail = next_pages_hint(pages, total)
    structured = {
        "view": {
            "kind": "pages",
            "pages": list(pages),
            "page_count": total,
            "page_format": args.page_format,
            "text_layer": [page.text_layer for page in read],
            "ocr": [page.ocr for page in read],
            "estimated_tokens": tokens,
        }
    }
    return CallToolResult(
        content=[TextContent(text=head), *blocks, TextContent(text=tail)], structured_content=structured
    )


async def _segment_result(
    views: MediaViews, caller: Caller, artifact_id: str, args: ViewArgs, budget: _Budget
) -> CallToolResult:
    source = await views.open(caller, artifact_id, kinds=("audio", "video"))
    start = args.start_seconds or 0.0
    view = await views.audio(source, start, args.duration_seconds)
    meta = view.meta
    end, total = float(meta["end_seconds"]), float(meta["duration_seconds"])
    # To the sample's precision, so that a 30 s segment is 960 tokens rather than 30.000000000000004 s.
    length = round(end - float(meta["start_seconds"]), 6)
    name = source.artifact.name
    head = segment_line(name, float(meta["start_seconds"]), end, total)
    block: ContentBlock
    # The estimate is of this answer's blocks, as for pages and frames: a linked segment costs nothing here.
    tokens = 0
    if budget.take(view.data):
        tokens = estimate_audio_tokens(length)
        head += f", 16 kHz mono WAV; about {tokens} tokens."
        block = AudioContent(data=_b64(view.data), mime_type="audio/wav")
    else:
        head += ", 16 kHz mono WAV, over this answer's inline budget: read the link with resources/read."
        block = ResourceLink(
            uri=audio_uri(source.artifact.id, float(meta["start_seconds"]), round(length, 3)),
            name=f"{name} {seconds(float(meta['start_seconds']))}-{seconds(end)} s",
            mime_type="audio/wav",
            size=len(view.data),
        )
    step = args.duration_seconds or views.max_audio_seconds
    tail = next_segment_hint(end, total, step)
    structured = {"view": {"kind": "audio", **meta, "estimated_tokens": tokens}}
    return CallToolResult(
        content=[TextContent(text=head), block, TextContent(text=tail)], structured_content=structured
    )


async def _frames_result(
    views: MediaViews, caller: Caller, artifact_id: str, args: ViewArgs, budget: _Budget
) -> CallToolResult:
    assert args.frames is not None
    source = await views.open(caller, artifact_id, kinds=("video",))
    facts = await views.facts(source)
    frames = await views.frames(source, args.frames, max_edge=args.max_edge, layout=args.frames_layout)
    name = source.artifact.name
    # Evenly spaced times of a video with fewer keyframes land on one keyframe for several: each is shown
    # once, so an answer never spends tokens on the same picture twice.
    frames = distinct_frames(frames)
    found = sum(len(view.meta.get("times") or [view.meta["time_seconds"]]) for view in frames)
    blocks: list[ContentBlock] = []
    tokens = 0
    shown: list[str] = []
    for view in frames:
        times = view.meta.get("times") or [view.meta["time_seconds"]]
        label = ", ".join(f"{seconds(float(t))} s" for t in times)
        if not budget.take(view.data):
            blocks.append(TextContent(text=f"(frame at {label} left out: over this answer's inline budget)"))
            continue
        blocks.append(TextContent(text=f"keyframe at {label}" if len(times) == 1 else f"sheet of {label}"))
        blocks.append(ImageContent(data=_b64(view.data), mime_type=view.mime_type))
        tokens += estimate_image_tokens(view.meta["width"], view.meta["height"])
        shown.append(label)
    total = float(facts.get("duration_seconds", 0.0))
    size = f"{facts.get('width')}x{facts.get('height')}"
    fewer = (
        f" ({args.frames} asked: the video has no other keyframes near those times)"
        if found < args.frames
        else ""
    )
    head = (
        f"{name}, {found} keyframe{'s' if found != 1 else ''} of {seconds(total)} s "
        f"({size}){fewer}; about {tokens} tokens."
    )
    tail = "Hear it with read_artifact(uri, start_seconds=0)." if facts.get("has_audio") else ""
    tail = (tail + " " if tail else "") + (
        'Other moments: read_artifact(uri, frames=N) with up to 8 frames, or frames_layout="sheet".'
    )
    structured = {
        "view": {
            "kind": "frames",
            "times": [view.meta.get("times") or view.meta["time_seconds"] for view in frames],
            "duration_seconds": total,
            "estimated_tokens": tokens,
        }
    }
    return CallToolResult(
        content=[TextContent(text=head), *blocks, TextContent(text=tail)], structured_content=structured
    )


async def _image_result(
    views: MediaViews, caller: Caller, artifact_id: str, args: ViewArgs, budget: _Budget
) -> CallToolResult:
    region = parse_region(args.region) if args.region is not None else None
    source = await views.open(caller, artifact_id, kinds=("image",))
    view = await views.image(source, region, args.max_edge)
    meta = view.meta
    x, y, w, h = meta["region"]
    name = source.artifact.name
    tokens = estimate_image_tokens(meta["width"], meta["height"])
    head = (
        f"{name}, region {x},{y},{w},{h} of {meta['source_width']}x{meta['source_height']} px, shown at "
        f"{meta['width']}x{meta['height']} px; about {tokens} tokens."
    )
    block = _image_block(view, budget, None, name)
    blocks: list[ContentBlock] = (
        [block]
        if block is not None
        else [TextContent(text="(the image is over this answer's inline budget: ask for a smaller max_edge)")]
    )
    tail = (
        'Another part: read_artifact(uri, region="x,y,w,h") in the original\'s pixels; '
        "max_edge sets the size."
    )
    structured = {"view": {"kind": "image", **meta, "estimated_tokens": tokens}}
    return CallToolResult(
        content=[TextContent(text=head), *blocks, TextContent(text=tail)], structured_content=structured
    )

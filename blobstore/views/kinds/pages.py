"""Pages of a PDF: each page's text layer (or, without one, what OCR reads on it) and the page as PNG.

``read_artifact(uri, pages="3-5", page_format="text"|"image"|"both"|"ocr")``; the resources
``…/pages/{page}.txt``, ``…/pages/{page}.png`` and ``…/pages/{page}/ocr.json``;
``GET /v1/artifacts/{id}/pages/{page}.txt``, ``.png`` and ``/pages/{page}/ocr.json``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple

from blobstore.errors import InvalidRequest
from blobstore.tokens import estimate_image_tokens, estimate_text_tokens
from blobstore.views.describe import next_pages_hint, page_list, pages_line
from blobstore.views.engines import pdfium, pillow, tesseract
from blobstore.views.kind import (
    MAX_EDGE_ARGUMENT,
    MAX_EDGE_QUERY,
    REQUIRED,
    Answer,
    Argument,
    Budget,
    Contents,
    Decoded,
    Engine,
    Inline,
    Item,
    Link,
    Listing,
    Payload,
    Resource,
    Route,
    Source,
    Text,
    Values,
    View,
    ViewKind,
    inline_or_link,
)
from blobstore.views.kinds.ocr import ocr_params, ocr_varies
from blobstore.views.ocr_text import OcrText, count_line, ocr_summary, ocr_text
from blobstore.views.params import PageFormat, check_edge, check_pages_exist, parse_page, parse_pages
from blobstore.views.plain_text import plain_text
from blobstore.views.progress import report

if TYPE_CHECKING:
    from blobstore.config import Settings
    from blobstore.models import Caller

SOURCES: Final = ("pdf",)
MAX_PAGE_SCALE: Final = 4.0
"""A page is rendered at most at 288 dpi, however small it is and however large the budget."""
OCR_SCALE: Final = 300 / 72
"""Pages are read by OCR at 300 dpi (what Tesseract is tuned for)..."""
OCR_MAX_EDGE: Final = 4096
"""...but never larger than 4096 px on the longer side."""
PAGE_TEXT_TEMPLATE: Final = "blobstore://artifacts/{artifact_id}/pages/{page}.txt"
PAGE_IMAGE_TEMPLATE: Final = "blobstore://artifacts/{artifact_id}/pages/{page}.png"
PAGE_OCR_TEMPLATE: Final = "blobstore://artifacts/{artifact_id}/pages/{page}/ocr.json"


def page_uri(
    artifact_id: str, page: int, ext: Literal["txt", "png", "ocr.json"], max_edge: int | None = None
) -> str:
    from blobstore.models import artifact_uri  # here, not in the worker, which never names a URI

    edge = f"?max_edge={max_edge}" if max_edge is not None and ext == "png" else ""
    where = f"{page}/ocr.json" if ext == "ocr.json" else f"{page}.{ext}"
    return f"{artifact_uri(artifact_id)}/pages/{where}{edge}"


# -- jobs, in the worker ----------------------------------------------------------------------------------


def pdf_pages_text(path: str, pages: list[int]) -> Decoded:
    """The text layer of each page (empty for a page without one)."""
    with pdfium.open_pdf(path) as pdf:
        count = pdf.page_count()
        out = Decoded(meta={"pages": count})
        for number in pages:
            pdf.check_page(number, count)
            text = plain_text(pdf.text(number)).strip()
            out.parts.append(({"page": number, "chars": len(text)}, text.encode("utf-8")))
        return out


def _render_page(
    path: str, number: int, scale_for: Callable[[float], float], *, grayscale: bool = False
) -> tuple[Any, int]:
    """Page ``number`` rendered at ``scale_for(its longer side in points)`` (a PIL image), and the count."""
    with pdfium.open_pdf(path) as pdf:
        count = pdf.page_count()
        pdf.check_page(number, count)
        return pdf.render(number, scale_for, grayscale=grayscale), count


def pdf_page_png(path: str, number: int, max_edge: int) -> Decoded:
    """One page rendered so that its longer side is at most ``max_edge`` pixels."""
    image, count = _render_page(path, number, lambda longer: min(MAX_PAGE_SCALE, max_edge / longer))
    meta = {"page": number, "pages": count, "width": image.width, "height": image.height}
    return Decoded(meta=meta, parts=[(meta, pillow.png(image))])


def pdf_page_ocr(path: str, number: int, languages: list[str] | None = None) -> Decoded:
    """What Tesseract reads on one page rendered at 300 dpi (at most :data:`OCR_MAX_EDGE` px), as an OCR
    document (:func:`~blobstore.views.engines.tesseract.read_document`) whose boxes are in the pixels of that
    rendering."""
    names = tuple(languages or ("eng",))
    program = tesseract.checked_program(names)
    image, count = _render_page(
        path, number, lambda longer: min(OCR_SCALE, OCR_MAX_EDGE / longer), grayscale=True
    )
    document = tesseract.read_document(program, image, names)
    meta = {"page": number, "pages": count, "width": image.width, "height": image.height, "ocr": True}
    document.update(meta)
    return Decoded(meta=meta, parts=[(meta, json.dumps(document, ensure_ascii=False).encode())])


# -- views, cached ----------------------------------------------------------------------------------------


class PageView(NamedTuple):
    """One page of a ``pages`` read: its text layer (None when only the image was asked for) and its image
    (asked for, or standing in for a page without a text layer)."""

    page: int
    text: str | None
    image: View | None
    text_layer: bool
    ocr: bool = False
    """Whether ``text`` is what OCR read (the page has no text layer)."""


async def page_count(views: Engine, source: Source, pages: tuple[int, ...] = ()) -> int:
    """The PDF's number of pages, after checking that each of ``pages`` is one of them (``not_found``
    for a page past the last, on every edge)."""
    total = int((await views.facts(source)).get("pages", 0))
    check_pages_exist(pages, total)
    return total


async def page_texts(views: Engine, source: Source, pages: tuple[int, ...]) -> list[View]:
    """The text layer of each page (UTF-8; empty for a page without one)."""
    wanted = list(pages)

    async def compute(missing: list[int]) -> list[View]:
        decoded = await views.decode(source, "pdf_pages_text", pages=[wanted[i] for i in missing])
        return [View(data=data, mime_type="text/plain", meta=meta) for meta, data in decoded.parts]

    return await views.many(source, [{"op": "page_text", "page": page} for page in wanted], compute)


async def page_image(views: Engine, source: Source, page: int, max_edge: int | None = None) -> View:
    edge = check_edge(max_edge or views.default_edge)

    async def compute() -> View:
        decoded = await views.decode(source, "pdf_page_png", number=page, max_edge=edge)
        meta, data = decoded.parts[0]
        return View(data=data, mime_type="image/png", meta=meta)

    return await views.one(source, {"op": "page_png", "page": page, "max_edge": edge}, compute)


async def page_ocr(views: Engine, source: Source, page: int) -> View:
    """What OCR reads on a page rendered at 300 dpi: an OCR document (JSON: lines and words with boxes in
    the rendering's pixels and confidences; :mod:`blobstore.views.ocr_text` makes its text).
    ``unsupported_media`` when no OCR engine or language pack is installed."""

    async def compute() -> View:
        decoded = await views.decode(source, "pdf_page_ocr", number=page, languages=list(views.ocr_languages))
        meta, data = decoded.parts[0]
        return View(data=data, mime_type="application/json", meta=meta)

    return await views.one(source, {"op": "page_ocr", "page": page, **ocr_params(views)}, compute)


async def read_pages(
    views: Engine,
    source: Source,
    pages: tuple[int, ...],
    page_format: PageFormat,
    max_edge: int | None = None,
) -> list[PageView]:
    """Each page as ``page_format`` asks. A page without a text layer gets what OCR reads on it when an
    OCR engine is installed and reads something (its words under the confidence threshold marked
    ``[?word]``), and its image otherwise (and whenever images are asked for). Each page read is reported
    (:func:`~blobstore.views.progress.report`, pages done of pages asked): OCR takes seconds a page."""
    texts = await page_texts(views, source, pages) if page_format != "image" else None
    out: list[PageView] = []
    for i, page in enumerate(pages):
        text = texts[i].data.decode("utf-8") if texts is not None else None
        has_text = bool(text)
        ocr = False
        if text is not None and not has_text and views.ocr:
            document = json.loads((await page_ocr(views, source, page)).data)
            text = ocr_text(document, views.ocr_min_confidence).text
            ocr = bool(text)
        image = None
        if page_format != "text" or not (has_text or ocr):
            image = await page_image(views, source, page, max_edge)
        out.append(PageView(page=page, text=text, image=image, text_layer=has_text, ocr=ocr))
        await report(i + 1, len(pages), f"page {page} read ({i + 1} of {len(pages)})")
    return out


def page_stated(document: Mapping[str, Any], min_confidence: float) -> dict[str, Any]:
    """A page's OCR document as the views state it: the page, the page count and the size of the
    rendering its boxes are in, then :func:`~blobstore.views.ocr_text.ocr_summary`."""
    where = {key: document[key] for key in ("page", "pages", "width", "height")}
    return {**where, **ocr_summary(document, min_confidence)}


async def page_summary(views: Engine, source: Source, page: int) -> dict[str, Any]:
    document = json.loads((await page_ocr(views, source, page)).data)
    return page_stated(document, views.ocr_min_confidence)


# -- read_artifact ----------------------------------------------------------------------------------------

_WHAT: Final = {"text": "text layer", "image": "page images", "both": "text layer and page images"}


async def answer(views: Engine, caller: Caller, artifact_id: str, values: Values, budget: Budget) -> Answer:
    return await _answer(views, caller, artifact_id, values, budget, media=True)


async def text_answer(
    views: Engine, caller: Caller, artifact_id: str, values: Values, budget: Budget
) -> Answer:
    """Pages in text alone (``include_media=false``): the text layer, or what OCR reads on a page without
    one; a page with neither is linked as its image, not shown."""
    page_format: PageFormat = values["page_format"]
    if page_format in ("image", "both"):
        raise InvalidRequest(
            f'page_format="{page_format}" asks for page images and include_media=false for none: '
            'read pages as "text" or "ocr"'
        )
    return await _answer(views, caller, artifact_id, values, budget, media=False)


async def _answer(
    views: Engine, caller: Caller, artifact_id: str, values: Values, budget: Budget, *, media: bool
) -> Answer:
    page_format: PageFormat = values["page_format"]
    max_edge: int | None = values["max_edge"]
    pages = parse_pages(values["pages"], views.max_pages)
    source = await views.open(caller, artifact_id, kinds=SOURCES)
    total = await page_count(views, source, pages)
    if page_format == "ocr":
        if max_edge is not None:
            raise InvalidRequest("OCR reads a page at 300 dpi: max_edge sizes a page image, leave it out")
        return await _ocr_answer(views, source, pages, total, budget)
    read = await read_pages(views, source, pages, page_format, max_edge)
    name = source.artifact.name
    items: list[Item] = []
    tokens = 0
    fallbacks: list[int] = []
    ocr_pages: list[int] = []
    for page in read:
        if page.text is not None and page.text_layer and not budget.take(page.text.encode("utf-8")):
            # Text counts against the answer's budget like any block: past it, the page's text resource.
            items.append(
                Text(
                    f"--- page {page.page} of {total} ---\n(its text is over this answer's inline "
                    "budget: read the link with resources/read)"
                )
            )
            items.append(
                Link(
                    uri=page_uri(source.artifact.id, page.page, "txt"),
                    name=f"{name} page {page.page}",
                    mime_type="text/plain",
                    size=len(page.text.encode("utf-8")),
                )
            )
        elif page.text is not None and page.text_layer:
            items.append(Text(f"--- page {page.page} of {total} ---\n{page.text}"))
            tokens += estimate_text_tokens(page.text)
        elif page.text is not None and page.ocr:
            ocr_pages.append(page.page)
            items.append(Text(f"--- page {page.page} of {total} (no text layer: OCR text) ---\n{page.text}"))
            tokens += estimate_text_tokens(page.text)
        elif page.text is not None:
            fallbacks.append(page.page)
            items.append(
                Text(
                    f"--- page {page.page} of {total} ---\n(no text layer on this page"
                    + (", and OCR read nothing on it" if views.ocr else " and no OCR installed")
                    + (": its image follows)" if media else ": its image is linked)")
                )
            )
        if page.image is not None:
            link = page_uri(source.artifact.id, page.page, "png", max_edge)
            item = (
                inline_or_link(page.image, budget, link, f"{name} page {page.page}")
                if media
                else Link(
                    link, f"{name} page {page.page}", page.image.mime_type, len(page.image.data), _NO_MEDIA
                )
            )
            if item is not None:
                items.append(item)
                if isinstance(item, Inline):
                    tokens += estimate_image_tokens(page.image.meta["width"], page.image.meta["height"])
    head = pages_line(name, pages, total, _WHAT[page_format])
    if ocr_pages:
        head += (
            f"; page {ocr_pages[0]} has no text layer: its text is what OCR read"
            if len(ocr_pages) == 1
            else f"; pages {page_list(ocr_pages)} have no text layer: their text is what OCR read"
        )
    shown = "shown" if media else "linked"
    if fallbacks:
        head += (
            f"; page {fallbacks[0]} has no text layer and is {shown} as an image"
            if len(fallbacks) == 1
            else f"; pages {page_list(fallbacks)} have no text layer and are {shown} as images"
        )
    head += f"; about {tokens} tokens."
    facts = {
        "kind": "pages",
        "pages": list(pages),
        "page_count": total,
        "page_format": page_format,
        "text_layer": [page.text_layer for page in read],
        "ocr": [page.ocr for page in read],
        "estimated_tokens": tokens,
    }
    return Answer(head, items, next_pages_hint(pages, total), facts)


_NO_MEDIA: Final = "a picture, linked: include_media=false asks for text alone"
_OCR_FORMAT: Final = 'page_format="ocr"'


async def _ocr_answer(
    views: Engine, source: Source, pages: tuple[int, ...], total: int, budget: Budget
) -> Answer:
    """Each page as what OCR reads on it rendered at 300 dpi, text layer or not: the text in reading order
    with its words to confirm marked and counted, and each page's lines and words with their boxes (in the
    pixels of that rendering) and confidences in the facts."""
    threshold = views.ocr_min_confidence
    name = source.artifact.name
    items: list[Item] = []
    stated: list[dict[str, Any]] = []
    tokens = words = flagged = lines = 0
    for i, page in enumerate(pages):
        document = json.loads((await page_ocr(views, source, page)).data)
        await report(i + 1, len(pages), f"page {page} read by OCR ({i + 1} of {len(pages)})")
        read = ocr_text(document, threshold)
        words, flagged, lines = words + read.words, flagged + read.flagged, lines + read.lines
        label = f"--- page {page} of {total} (OCR: {count_line(read, threshold)}) ---"
        facts = page_stated(document, threshold)
        if not read.text:
            items.append(Text(f"{label}\n(OCR read no text on this page)"))
        elif budget.take(read.text.encode("utf-8")):
            items.append(Text(f"{label}\n{read.text}"))
            tokens += estimate_text_tokens(read.text)
        else:
            items.append(Text(f"{label}\n(its text is over this answer's inline budget: read the link)"))
            # The page's resource, whose size is that of its JSON as resources/read gives it.
            body = json.dumps(facts, ensure_ascii=False).encode("utf-8")
            link = page_uri(source.artifact.id, page, "ocr.json")
            items.append(Link(link, f"{name} page {page} OCR", "application/json", len(body)))
        del facts["text"]  # the text blocks hold it
        stated.append(facts)
    total_read = count_line(OcrText("", words, flagged, lines), threshold)
    head = f"{pages_line(name, pages, total, 'OCR text')}: {total_read}; about {tokens} tokens."
    tail = (
        f"{next_pages_hint(pages, total, also=_OCR_FORMAT)} A word marked [?word] is to be "
        "confirmed, never evidence: see the page with page_format=\"image\"; each line's and word's box "
        "(x, y, w, h in the pixels of the page at 300 dpi) and confidence are in "
        "structuredContent.view.page_ocr."
    )
    facts_out = {
        "kind": "pages",
        "pages": list(pages),
        "page_count": total,
        "page_format": "ocr",
        "min_confidence": threshold,
        "words_read": words,
        "words_to_confirm": flagged,
        "page_ocr": stated,
        "estimated_tokens": tokens,
    }
    return Answer(head, items, tail, facts_out)


# -- resources --------------------------------------------------------------------------------------------

_PAGE_QUERY_ERROR: Final = "a page URI takes no query parameters but a page image's max_edge"


def _text_values(path: Mapping[str, str], query: str) -> dict[str, Any]:
    if query:
        raise InvalidRequest(_PAGE_QUERY_ERROR)
    return {"page": parse_page(path["page"]), "max_edge": None}


def _image_values(path: Mapping[str, str], query: str) -> dict[str, Any]:
    edge: int | None = None
    if query:
        # A page image may name the size it was read at (the link of one over an answer's budget).
        key, _, value = query.partition("=")
        if key != "max_edge" or not value.isdigit() or len(value) > 5:
            raise InvalidRequest(_PAGE_QUERY_ERROR)
        edge = check_edge(int(value))
    return {"page": parse_page(path["page"]), "max_edge": edge}


async def _read_text(views: Engine, caller: Caller, artifact_id: str, values: Values) -> Contents:
    source = await views.open(caller, artifact_id, kinds=SOURCES)
    total = await page_count(views, source, (values["page"],))
    (text,) = await page_texts(views, source, (values["page"],))
    meta = {**text.meta, "pages": total}
    return Contents("text/plain", text.data.decode("utf-8"), None, meta, source)


def _ocr_values(path: Mapping[str, str], query: str) -> dict[str, Any]:
    if query:
        raise InvalidRequest("a page's OCR URI takes no query parameters")
    return {"page": parse_page(path["page"])}


async def _read_ocr(views: Engine, caller: Caller, artifact_id: str, values: Values) -> Contents:
    source = await views.open(caller, artifact_id, kinds=SOURCES)
    await page_count(views, source, (values["page"],))
    found = await page_summary(views, source, values["page"])
    meta = {key: found[key] for key in ("page", "pages", "width", "height", "words_read", "words_to_confirm")}
    return Contents("application/json", json.dumps(found, ensure_ascii=False), None, meta, source)


async def _read_image(views: Engine, caller: Caller, artifact_id: str, values: Values) -> Contents:
    source = await views.open(caller, artifact_id, kinds=SOURCES)
    await page_count(views, source, (values["page"],))
    image = await page_image(views, source, values["page"], values["max_edge"])
    return Contents("image/png", None, image.data, image.meta, source)


def _image_template_words(settings: Settings) -> str:
    return (
        "One page of a PDF artifact rendered as PNG, its longer side at most the server's "
        f"long-edge budget ({settings.image_long_edge} px; ?max_edge=N for another)."
    )


# -- HTTP -------------------------------------------------------------------------------------------------

_PAGE_NUMBER: Final = Argument("page", int, REQUIRED, bounds={"ge": 1, "le": 9_999_999}, where="path")


async def _page_exists(views: Engine, source: Source, values: Values) -> None:
    await page_count(views, source, (values["page"],))


async def _text_payload(views: Engine, source: Source, values: Values) -> Payload:
    (view,) = await page_texts(views, source, (values["page"],))
    return Payload(view.data, "text/plain; charset=utf-8")


async def _image_payload(views: Engine, source: Source, values: Values) -> Payload:
    view = await page_image(views, source, values["page"], values["max_edge"])
    return Payload(view.data, view.mime_type)


async def _ocr_payload(views: Engine, source: Source, values: Values) -> Listing:
    return await page_summary(views, source, values["page"])


def _pages_words(settings: Settings) -> str:
    return (
        f'PDF: pages to read, 1-based: "7", "3-5", "1,4,9-10" (at most {settings.view_max_pages} per call).'
    )


KIND: Final = ViewKind(
    name="pages",
    sources=SOURCES,
    arguments=(
        Argument("pages", str | None, description=_pages_words, bounds={"max_length": 200}),
        Argument(
            "page_format",
            PageFormat,
            "text",
            description="PDF: the text layer (default; a page without one comes as its OCR text or its "
            'image), the rendered page image, both, or "ocr": what OCR reads on the page, with each line\'s '
            "and word's box and confidence in structuredContent.",
        ),
    ),
    selectors=("pages",),
    noun="pages",
    example='pages="1"',
    phrase="a PDF's pages (pages, page_format)",
    answer=answer,
    text=text_answer,
    shared=(MAX_EDGE_ARGUMENT,),
    jobs=(pdf_pages_text, pdf_page_png, pdf_page_ocr),
    routes=(
        Route(
            path="/pages/{page}.txt",
            name="page_text",
            summary="The text layer of one PDF page (UTF-8; empty for a page without one)",
            parameters=(_PAGE_NUMBER,),
            etag=lambda values: {"route": "page.txt", "page": values["page"]},
            answer=_text_payload,
            media_type="text/plain",
            check=_page_exists,
        ),
        Route(
            path="/pages/{page}.png",
            name="page_image",
            summary="One PDF page rendered as PNG within the long-edge budget",
            parameters=(_PAGE_NUMBER, MAX_EDGE_QUERY),
            etag=lambda values: {"route": "page.png", "page": values["page"], "max_edge": values["max_edge"]},
            answer=_image_payload,
            media_type="image/png",
            check=_page_exists,
        ),
        Route(
            path="/pages/{page}/ocr.json",
            name="page_ocr",
            summary="What OCR reads on one PDF page rendered at 300 dpi: lines and words with boxes in that "
            "rendering's pixels and confidences",
            parameters=(_PAGE_NUMBER,),
            etag=lambda values: {"route": "page.ocr.json", "page": values["page"]},
            answer=_ocr_payload,
            check=_page_exists,
            varies=ocr_varies,
        ),
    ),
    resources=(
        Resource(
            name="artifact-page-text",
            title="PDF page text",
            template=PAGE_TEXT_TEMPLATE,
            mime_type="text/plain",
            description="The text layer of one page of a PDF artifact (pages count from 1), as UTF-8 text. "
            "Empty for a page without a text layer: read its image instead.",
            ref="page_text",
            path=re.compile(r"pages/(?P<page>[^/?]{1,8})\.txt"),
            values=_text_values,
            read=_read_text,
        ),
        Resource(
            name="artifact-page-image",
            title="PDF page image",
            template=PAGE_IMAGE_TEMPLATE,
            mime_type="image/png",
            description=_image_template_words,
            ref="page_image",
            path=re.compile(r"pages/(?P<page>[^/?]{1,8})\.png"),
            values=_image_values,
            read=_read_image,
        ),
        Resource(
            name="artifact-page-ocr",
            title="PDF page OCR with positions",
            template=PAGE_OCR_TEMPLATE,
            mime_type="application/json",
            description="What OCR reads on one page of a PDF artifact rendered at 300 dpi, text layer or "
            "not: JSON of its lines and words, each with its box [x, y, w, h] in that rendering's pixels and "
            "its confidence (0-1), and the text with words to confirm marked [?word].",
            ref="page_ocr",
            path=re.compile(r"pages/(?P<page>[^/?]{1,8})/ocr\.json"),
            values=_ocr_values,
            read=_read_ocr,
        ),
    ),
)

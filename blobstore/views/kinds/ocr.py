"""Text read by OCR on an image (a screenshot above all) or a region of it: lines in reading order, each line
and word with its box in the original's pixels and its confidence, the words under the threshold marked
``[?word]``.

``read_artifact(uri, ocr=true, region="x,y,w,h")``; the resources ``…/ocr.txt{?region}`` and
``…/ocr.json{?region}``; ``GET /v1/artifacts/{id}/ocr.txt`` and ``ocr.json`` (``?region=``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, Literal
from urllib.parse import unquote

from blobstore.errors import InvalidRequest
from blobstore.tokens import estimate_text_tokens
from blobstore.views.engines import pillow, tesseract
from blobstore.views.kind import (
    REGION_ARGUMENT,
    Answer,
    Argument,
    Budget,
    Contents,
    Decoded,
    Engine,
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
)
from blobstore.views.ocr_text import count_line, ocr_summary, ocr_text
from blobstore.views.params import parse_region

if TYPE_CHECKING:
    from blobstore.models import Caller

SOURCES: Final = ("image",)
OCR_MAX_EDGE: Final = 4096
"""An image is read by OCR at its own size, or scaled down to this on its longer side."""
OCR_TEXT_TEMPLATE: Final = "blobstore://artifacts/{artifact_id}/ocr.txt{?region}"
OCR_JSON_TEMPLATE: Final = "blobstore://artifacts/{artifact_id}/ocr.json{?region}"

Region = tuple[int, int, int, int]


def ocr_uri(artifact_id: str, region: Region | None, ext: Literal["txt", "json"]) -> str:
    from blobstore.models import artifact_uri  # here, not in the worker, which never names a URI

    crop = f"?region={','.join(map(str, region))}" if region is not None else ""
    return f"{artifact_uri(artifact_id)}/ocr.{ext}{crop}"


# -- jobs, in the worker ----------------------------------------------------------------------------------


def image_ocr(path: str, region: list[int] | None, languages: list[str] | None = None) -> Decoded:
    """What Tesseract reads on a crop ``[x, y, w, h]`` of the original (or all of it), as an OCR document
    with boxes in the original's pixels. The crop is read at its own size, or scaled down to
    :data:`OCR_MAX_EDGE` on its longer side; an image over the decoder's pixel budget (a decompression bomb)
    is ``view_too_large`` before any pixel is decoded."""
    names = tuple(languages or ("eng",))
    program = tesseract.checked_program(names)
    piece, (width, height), cut = pillow.region(path, region, OCR_MAX_EDGE)
    read = pillow.fit(pillow.on_white(piece), OCR_MAX_EDGE)
    document = tesseract.read_document(
        program, read, names, origin=(cut[0], cut[1]), scale=read.width / max(1, cut[2] - cut[0])
    )
    meta = {
        "region": [cut[0], cut[1], cut[2] - cut[0], cut[3] - cut[1]],
        "source_width": width,
        "source_height": height,
    }
    document.update(meta)
    return Decoded(meta=meta, parts=[(meta, json.dumps(document, ensure_ascii=False).encode())])


# -- views, cached ----------------------------------------------------------------------------------------


def ocr_params(views: Engine) -> dict[str, Any]:
    """What an OCR view's cache key names besides its own parameters: the engine and its languages."""
    return {"engine": tesseract.NAME, "languages": "+".join(views.ocr_languages)}


def ocr_varies(views: Engine) -> dict[str, Any]:
    """What an OCR route's bytes depend on of this server: the engine, its languages and the threshold."""
    return {**ocr_params(views), "min_confidence": views.ocr_min_confidence}


async def read_image_ocr(views: Engine, source: Source, region: Region | None) -> View:
    """What OCR reads on an image or a crop of it: an OCR document (JSON) with boxes in the original's
    pixels (:mod:`blobstore.views.ocr_text` makes its text). ``unsupported_media`` when no OCR engine or
    language pack is installed."""
    crop = list(region) if region else None
    params = {"op": "image_ocr", "region": crop, **ocr_params(views)}

    async def compute() -> View:
        decoded = await views.decode(source, "image_ocr", region=crop, languages=list(views.ocr_languages))
        meta, data = decoded.parts[0]
        return View(data=data, mime_type="application/json", meta=meta)

    return await views.one(source, params, compute)


async def document_of(views: Engine, source: Source, region: Region | None) -> dict[str, Any]:
    """The OCR document of the image or region (the cached view's JSON)."""
    document: dict[str, Any] = json.loads((await read_image_ocr(views, source, region)).data)
    return document


def stated(document: Mapping[str, Any], min_confidence: float) -> dict[str, Any]:
    """An image's OCR document as the views state it: the part read and the source's size, then
    :func:`~blobstore.views.ocr_text.ocr_summary`."""
    where = {key: document[key] for key in ("region", "source_width", "source_height")}
    return {**where, **ocr_summary(document, min_confidence)}


async def summary(views: Engine, source: Source, region: Region | None) -> dict[str, Any]:
    return stated(await document_of(views, source, region), views.ocr_min_confidence)


def _region(values: Values) -> Region | None:
    return parse_region(values["region"]) if values["region"] is not None else None


# -- read_artifact ----------------------------------------------------------------------------------------


async def answer(views: Engine, caller: Caller, artifact_id: str, values: Values, budget: Budget) -> Answer:
    if values.get("max_edge") is not None:
        raise InvalidRequest("OCR reads the original's pixels: max_edge sizes a picture, leave it out")
    region = _region(values)
    source = await views.open(caller, artifact_id, kinds=SOURCES)
    document = await document_of(views, source, region)
    read = ocr_text(document, views.ocr_min_confidence)
    name = source.artifact.name
    x, y, w, h = document["region"]
    size = f"{document['source_width']}x{document['source_height']} px"
    part = size if region is None else f"region {x},{y},{w},{h} of {size}"
    tokens = estimate_text_tokens(read.text)
    head = f"{name}, OCR text of {part}: {count_line(read, views.ocr_min_confidence)}; about {tokens} tokens."
    item: Item
    if not read.text:
        item = Text("(OCR read no text here)")
    elif budget.take(read.text.encode("utf-8")):
        item = Text(read.text)
    else:
        item = Link(
            ocr_uri(source.artifact.id, region, "txt"),
            f"{name} OCR text",
            "text/plain",
            len(read.text.encode("utf-8")),
            "over this answer's inline budget: read it with resources/read",
        )
        tokens = 0
    tail = (
        "A word marked [?word] is to be confirmed, never evidence: see it with "
        "read_artifact(uri, region=\"x,y,w,h\"); each line's and word's box (x, y, w, h in the original's "
        "pixels) and confidence are in structuredContent.view.lines."
    )
    facts = {"kind": "ocr", **stated(document, views.ocr_min_confidence), "estimated_tokens": tokens}
    del facts["text"]  # the text block holds it
    return Answer(head, [item], tail, facts)


# -- resources --------------------------------------------------------------------------------------------


def _values(path: Mapping[str, str], query: str) -> dict[str, Any]:
    if not query:
        return {"region": None}
    key, _, value = query.partition("=")
    if key != "region" or not value or len(value) > 60:
        raise InvalidRequest('an OCR URI takes no query parameters but region="x,y,w,h"')
    return {"region": ",".join(map(str, parse_region(unquote(value))))}


async def _read_text(views: Engine, caller: Caller, artifact_id: str, values: Values) -> Contents:
    source = await views.open(caller, artifact_id, kinds=SOURCES)
    found = await summary(views, source, _region(values))
    text = found.pop("text")
    found.pop("lines")
    return Contents("text/plain", text, None, found, source)


async def _read_json(views: Engine, caller: Caller, artifact_id: str, values: Values) -> Contents:
    source = await views.open(caller, artifact_id, kinds=SOURCES)
    found = await summary(views, source, _region(values))
    text = json.dumps(found, ensure_ascii=False)
    meta = {key: found[key] for key in ("region", "source_width", "source_height", "words_read")}
    return Contents("application/json", text, None, meta, source)


# -- HTTP -------------------------------------------------------------------------------------------------

_REGION_QUERY: Final = Argument(
    "region", str | None, None, 'The crop "x,y,w,h" in the original\'s pixels', {"max_length": 60}
)


def _etag(route: str) -> Any:
    def etag(values: Values) -> dict[str, Any]:
        region = _region(values)
        return {"route": route, "region": list(region) if region else None}

    return etag


async def _json_payload(views: Engine, source: Source, values: Values) -> Listing:
    return await summary(views, source, _region(values))


async def _text_payload(views: Engine, source: Source, values: Values) -> Payload:
    found = await summary(views, source, _region(values))
    counts = {
        "x-ocr-words": str(found["words_read"]),
        "x-ocr-words-to-confirm": str(found["words_to_confirm"]),
        "x-ocr-min-confidence": f"{found['min_confidence']:g}",
    }
    return Payload(str(found["text"]).encode("utf-8"), "text/plain; charset=utf-8", counts)


_TEMPLATE_WORDS: Final = (
    "What OCR reads on an image artifact (or its region x,y,w,h, in the original's pixels): "
)

KIND: Final = ViewKind(
    name="ocr",
    sources=SOURCES,
    arguments=(
        Argument(
            "ocr",
            bool,
            False,
            description="Image: true reads its text by OCR (of the region, if given): the text in reading "
            "order, words to confirm marked [?word], each line's and word's box and confidence in "
            "structuredContent.",
        ),
    ),
    selectors=("ocr",),
    noun="OCR",
    example="ocr=true",
    phrase="an image's text by OCR, with boxes and confidences (ocr, region)",
    answer=answer,
    text=answer,
    shared=(REGION_ARGUMENT,),
    jobs=(image_ocr,),
    routes=(
        Route(
            path="/ocr.json",
            name="image_ocr",
            summary="What OCR reads on an image (or a region): lines and words with boxes in the original's "
            "pixels and confidences",
            parameters=(_REGION_QUERY,),
            etag=_etag("ocr.json"),
            answer=_json_payload,
            varies=ocr_varies,
        ),
        Route(
            path="/ocr.txt",
            name="image_ocr_text",
            summary="What OCR reads on an image (or a region) as text, words to confirm marked [?word]",
            parameters=(_REGION_QUERY,),
            etag=_etag("ocr.txt"),
            answer=_text_payload,
            media_type="text/plain",
            varies=ocr_varies,
        ),
    ),
    resources=(
        Resource(
            name="artifact-ocr-text",
            title="Image OCR text",
            template=OCR_TEXT_TEMPLATE,
            mime_type="text/plain",
            description=_TEMPLATE_WORDS + "its text in reading order, words read with a confidence under "
            "the threshold marked [?word] (to be confirmed).",
            ref="ocr_text",
            path=re.compile(r"ocr\.txt"),
            values=_values,
            read=_read_text,
        ),
        Resource(
            name="artifact-ocr",
            title="Image OCR with positions",
            template=OCR_JSON_TEMPLATE,
            mime_type="application/json",
            description=_TEMPLATE_WORDS + "JSON of its lines and words, each with its box [x, y, w, h] in "
            "the original's pixels and its confidence (0-1), and the text with words to confirm marked.",
            ref="ocr",
            path=re.compile(r"ocr\.json"),
            values=_values,
            read=_read_json,
        ),
    ),
)

"""Regions of an image: a crop in the original's pixels (or all of it), fitted to a long edge, as PNG.

``read_artifact(uri, region="x,y,w,h", max_edge=…)``; over MCP only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from blobstore.tokens import estimate_image_tokens
from blobstore.views.engines import pillow
from blobstore.views.kind import (
    MAX_EDGE_ARGUMENT,
    REGION_ARGUMENT,
    Answer,
    Budget,
    Decoded,
    Engine,
    Item,
    Source,
    Text,
    Values,
    View,
    ViewKind,
    inline_or_link,
)
from blobstore.views.kinds import ocr
from blobstore.views.params import check_edge, parse_region

if TYPE_CHECKING:
    from blobstore.models import Caller

SOURCES: Final = ("image",)

# -- jobs, in the worker ----------------------------------------------------------------------------------


def image_view(path: str, region: list[int] | None, max_edge: int) -> Decoded:
    """A crop ``[x, y, w, h]`` of the original (or all of it), fitted to ``max_edge``; PNG out."""
    piece, (width, height), box = pillow.region(path, region, max_edge)
    fitted = pillow.fit(pillow.png_mode(piece), max_edge)
    meta = {
        "region": [box[0], box[1], box[2] - box[0], box[3] - box[1]],
        "source_width": width,
        "source_height": height,
        "width": fitted.width,
        "height": fitted.height,
    }
    return Decoded(meta=meta, parts=[(meta, pillow.png(fitted))])


# -- views, cached ----------------------------------------------------------------------------------------


async def image(
    views: Engine, source: Source, region: tuple[int, int, int, int] | None, max_edge: int | None = None
) -> View:
    """A crop of the original (its pixels), fitted to the long-edge budget, as PNG."""
    edge = check_edge(max_edge or views.default_edge)
    params = {"op": "image", "region": list(region) if region else None, "max_edge": edge}

    async def compute() -> View:
        decoded = await views.decode(
            source, "image_view", region=list(region) if region else None, max_edge=edge
        )
        meta, data = decoded.parts[0]
        return View(data=data, mime_type="image/png", meta=meta)

    return await views.one(source, params, compute)


# -- read_artifact ----------------------------------------------------------------------------------------


async def answer(views: Engine, caller: Caller, artifact_id: str, values: Values, budget: Budget) -> Answer:
    region = parse_region(values["region"]) if values["region"] is not None else None
    source = await views.open(caller, artifact_id, kinds=SOURCES)
    view = await image(views, source, region, values["max_edge"])
    meta = view.meta
    x, y, w, h = meta["region"]
    name = source.artifact.name
    tokens = estimate_image_tokens(meta["width"], meta["height"])
    head = (
        f"{name}, region {x},{y},{w},{h} of {meta['source_width']}x{meta['source_height']} px, shown at "
        f"{meta['width']}x{meta['height']} px; about {tokens} tokens."
    )
    item = inline_or_link(view, budget, None, name)
    items: list[Item] = (
        [item]
        if item is not None
        else [Text("(the image is over this answer's inline budget: ask for a smaller max_edge)")]
    )
    tail = (
        'Another part: read_artifact(uri, region="x,y,w,h") in the original\'s pixels; '
        "max_edge sets the size."
    )
    return Answer(head, items, tail, {"kind": "image", **meta, "estimated_tokens": tokens})


async def text_answer(
    views: Engine, caller: Caller, artifact_id: str, values: Values, budget: Budget
) -> Answer:
    """A region in text alone (``include_media=false``): what OCR reads on it, whatever size it was asked
    to be shown at."""
    return await ocr.answer(views, caller, artifact_id, {**values, "max_edge": None}, budget)


KIND: Final = ViewKind(
    name="regions",
    sources=SOURCES,
    arguments=(REGION_ARGUMENT,),
    selectors=("region",),
    noun="region",
    example='region="0,0,100,100"',
    phrase="an image's region (region, max_edge)",
    answer=answer,
    text=text_answer,
    shared=(MAX_EDGE_ARGUMENT,),
    implied=True,
    jobs=(image_view,),
)

"""Text in place of pixels or sound: for each modality a host's model may not take, the view that says in
text what an artifact of that modality holds. A screenshot's words cost about 100 tokens where its pixels
cost about 1,500, and a host that cannot take an image or audio block gets nothing from one.

:data:`TEXT_VIEWS` maps a modality (``image``, ``audio``) to the view that stands for it, one registration
each: an image's OCR text, a recording's transcript. The proxy's
offload rule and ``read_artifact``'s default use :func:`text_view` wherever the host cannot take the
modality, and ``read_artifact(..., include_media=false)`` everywhere.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from blobstore.views.engine import MediaViews
from blobstore.views.kind import Source, kind_of
from blobstore.views.kinds import transcripts
from blobstore.views.ocr_text import count_line


@dataclass(frozen=True, slots=True)
class TextView:
    what: str
    """What the text is: ``OCR text``, ``transcript``."""
    head: str
    """Its facts, for the answer's first line: ``41 words in 6 lines, 3 under 0.9 confidence marked
    [?word]``."""
    text: str


TextViewMaker = Callable[[MediaViews, Source], Awaitable[TextView]]

MODALITY_OF_KIND: Final = {"image": "image", "audio": "audio"}
"""The modality of a source's kind of views (a PDF's and a video's have their own views)."""


def modality_of(mime_type: str) -> str | None:
    """``image`` or ``audio``: the content block a model would get for an artifact of this type."""
    kind = kind_of(mime_type)
    return MODALITY_OF_KIND.get(kind) if kind is not None else None


async def ocr_text_view(views: MediaViews, source: Source) -> TextView:
    """The OCR text of an image, words under the confidence threshold marked ``[?word]``."""
    document = await views.image_ocr(source, None)
    read = views.ocr_text(document)
    return TextView("OCR text", count_line(read, views.ocr_min_confidence), read.text)


async def transcript_text_view(views: MediaViews, source: Source) -> TextView:
    """The transcript of a recording's first ``BLOBSTORE_VIEW_MAX_TRANSCRIPT_SECONDS``, low-confidence
    segments marked, its last line naming the next speech."""
    found = await transcripts.transcript(views, source, 0.0, None)
    text = transcripts.text_of(found)
    hint = transcripts.next_hint(found)
    return TextView("transcript", transcripts.count_line(found), f"{text}\n{hint}" if text else hint)


TEXT_VIEWS: dict[str, TextViewMaker] = {"image": ocr_text_view, "audio": transcript_text_view}


async def text_view(views: MediaViews, source: Source) -> TextView | None:
    """The text view standing for ``source``'s modality, or None when it has none registered. The view's
    own errors (``unsupported_media`` without an OCR engine, ``view_too_large``) are raised."""
    modality = modality_of(source.artifact.mime_type)
    maker = TEXT_VIEWS.get(modality) if modality is not None else None
    return await maker(views, source) if maker is not None else None

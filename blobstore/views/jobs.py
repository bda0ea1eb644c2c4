"""The jobs a decoder worker runs, by name (:data:`OPERATIONS`): the facts of each kind of source, taken at
upload, and the jobs every view kind declares (:data:`blobstore.views.kinds.KINDS`).

Each reads only what it needs (the first pages' text layer, the first packets of a stream) with the engines
of :mod:`blobstore.views.engines`, and raises the catalogue's media errors for bytes it refuses.
"""

from __future__ import annotations

from typing import Final

from blobstore.views.engines import av, pdfium, pillow, vad
from blobstore.views.kind import Decoded, Job
from blobstore.views.kinds import KINDS

FACT_TEXT_PAGES: Final = 50
"""Pages checked for a text layer when a PDF's facts are taken (the first ones)."""


def pdf_facts(path: str) -> Decoded:
    with pdfium.open_pdf(path) as pdf:
        count = pdf.page_count()
        checked = min(count, FACT_TEXT_PAGES)
        with_text = sum(1 for number in range(1, checked + 1) if pdf.text(number))
        return Decoded(
            meta={
                "pages": count,
                "text_layer": with_text > 0,
                "text_pages_checked": checked,
                "text_pages": with_text,
            }
        )


def audio_facts(path: str) -> Decoded:
    return Decoded(meta=av.audio_facts(path))


def video_facts(path: str) -> Decoded:
    return Decoded(meta=av.video_facts(path))


def video_probe(path: str) -> Decoded:
    """A typed video argument's facts, once its first frame decodes."""
    return Decoded(meta=av.video_probe(path))


def image_facts(path: str) -> Decoded:
    """A typed image argument's facts, once its pixels decode."""
    return Decoded(meta=pillow.facts(path))


def speech_map(path: str) -> Decoded:
    """Where speech is in the first audio stream (a video's sound too): spans in seconds from the file's
    start, found by the voice-activity detector in one pass over its samples, kept piece by piece."""
    spans, total = vad.speech_spans(av.pcm_pieces(path))
    return Decoded(
        meta={
            "speech": [[start, end] for start, end in spans],
            "decoded_seconds": round(total, 3),
            "vad": vad.NAME,
        }
    )


FACT_JOBS: Final[tuple[Job, ...]] = (
    pdf_facts,
    audio_facts,
    video_facts,
    video_probe,
    image_facts,
    speech_map,
)
"""The jobs that take a source's facts (at upload, and for a typed media argument), beside the view kinds'."""

OPERATIONS: Final[dict[str, Job]] = {
    job.__name__: job for job in (*FACT_JOBS, *(job for kind in KINDS for job in kind.jobs))
}

"""What OCR read, as the text a model reads: lines in reading order, and every word read with a confidence
under the threshold marked ``[?word]`` ("to be confirmed", never evidence) and counted.

The OCR document is the JSON a decoder job makes (:func:`blobstore.views.kinds.ocr.image_ocr`,
:func:`blobstore.views.kinds.pages.pdf_page_ocr`): ``lines``, each with its ``block``, ``paragraph``, ``box``
(``[x, y, w, h]`` in the original's pixels), ``confidence`` (0-1) and ``words`` (``text``, ``box``,
``confidence``). The threshold is applied here, when the text is made, so one cached reading serves every
threshold.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class OcrText:
    text: str
    words: int
    flagged: int
    """Words under the threshold, marked ``[?word]`` in ``text``."""
    lines: int


def _wide(char: str) -> bool:
    """A character of a script written without spaces between words (CJK ideographs, kana, Hangul, and
    their full-width punctuation): Tesseract reads each as a word of its own."""
    return unicodedata.east_asian_width(char) in ("W", "F")


def join_words(words: Sequence[str]) -> str:
    """Words with a space between them, but none between two of a script written without spaces."""
    out = ""
    for word in words:
        if out and not (_wide(out[-1]) and _wide(word[0])):
            out += " "
        out += word
    return out


def marked(word: Mapping[str, Any], min_confidence: float) -> tuple[str, bool]:
    text = str(word["text"])
    if float(word["confidence"]) < min_confidence:
        return f"[?{text}]", True
    return text, False


def ocr_text(document: Mapping[str, Any], min_confidence: float) -> OcrText:
    """The text of an OCR document: a line of text per line read, an empty line between paragraphs."""
    out: list[str] = []
    words = flagged = 0
    previous: tuple[Any, Any] | None = None
    for line in document.get("lines", []):
        place = (line.get("block"), line.get("paragraph"))
        if previous is not None and place != previous:
            out.append("")
        previous = place
        texts = []
        for word in line["words"]:
            text, low = marked(word, min_confidence)
            texts.append(text)
            words += 1
            flagged += low
        out.append(join_words(texts))
    return OcrText("\n".join(out), words, flagged, len(document.get("lines", [])))


def count_line(result: OcrText, min_confidence: float) -> str:
    """``41 words in 6 lines, 3 under 0.9 confidence marked [?word]``: the facts an OCR answer's first line
    gives."""
    noun = "word" if result.words == 1 else "words"
    lines = "line" if result.lines == 1 else "lines"
    head = f"{result.words} {noun} in {result.lines} {lines}"
    if not result.words:
        return "no words read"
    return f"{head}, {result.flagged} under {min_confidence:g} confidence marked [?word]"


def ocr_lines(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The document's lines as an answer states them: each one's text (its words joined, unmarked), then its
    block, paragraph, box, confidence and words (text, box, confidence)."""
    return [
        {"text": join_words([str(word["text"]) for word in line["words"]]), **line}
        for line in document.get("lines", [])
    ]


def ocr_summary(document: Mapping[str, Any], min_confidence: float) -> dict[str, Any]:
    """An OCR document as the views state it (``ocr.json``, ``structuredContent``): the engine and its
    languages, the threshold, how many words were read and how many are to be confirmed, the text with those
    marked, and the lines with their boxes and confidences."""
    read = ocr_text(document, min_confidence)
    return {
        "engine": document.get("engine"),
        "languages": document.get("languages"),
        "min_confidence": min_confidence,
        "words_read": read.words,
        "words_to_confirm": read.flagged,
        "text": read.text,
        "lines": ocr_lines(document),
    }

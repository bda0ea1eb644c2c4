"""Tesseract (the ``tesseract`` program, Debian's ``tesseract-ocr``): the words it reads on an image, each
with its box and confidence, in its reading order.

A program, not a library: it runs as a child of the worker, in the worker's process group, so the worker's
time limit (the runner kills the group) bounds it too. Its TSV output (the ``tsv`` config Debian ships) gives
one row per word with the block, paragraph and line it belongs to; :func:`parse_tsv` reads it without I/O.
The language packs are Debian's ``tesseract-ocr-<lang>`` (``eng``, ``chi_sim``, …), named ``eng+chi_sim``.
"""

from __future__ import annotations

import re
from typing import Any, Final, NamedTuple

from blobstore.errors import MediaInvalid, UnsupportedMedia
from blobstore.views.plain_text import plain_text

NAME: Final = "tesseract"
_LANGUAGE: Final = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,31}")
_FIELDS: Final = 12
_WORD_LEVEL: Final = "5"

# The modules it runs the program with are imported where they are used, like a library: a worker that
# renders a page or cuts a segment never starts a program.


def command() -> str | None:
    """The Tesseract program when one is installed, else None."""
    import shutil

    return shutil.which("tesseract")


def parse_languages(spec: str) -> tuple[str, ...]:
    """``"eng+chi_sim"`` as ``("eng", "chi_sim")``; ``ValueError`` for anything else (an empty name, a
    path, an option)."""
    names = tuple(spec.split("+"))
    if not all(_LANGUAGE.fullmatch(name) for name in names):
        raise ValueError(
            f"OCR languages are Tesseract pack names joined by '+', like 'eng+chi_sim', not {spec!r}"
        )
    return names


def installed_languages(program: str) -> set[str]:
    """The language packs ``program`` finds (``tesseract --list-langs``)."""
    import subprocess

    done = subprocess.run([program, "--list-langs"], capture_output=True, check=False)
    lines = done.stdout.decode("utf-8", errors="replace").splitlines()
    return {line.strip() for line in lines[1:] if line.strip()}


def version(program: str) -> str:
    """``tesseract 5.3.0``: part of every OCR view's cache key, so that another engine reads afresh."""
    import subprocess

    done = subprocess.run([program, "--version"], capture_output=True, check=False)
    first = done.stdout.decode("utf-8", errors="replace").splitlines()[:1]
    return first[0].strip() if first else NAME


def checked_program(languages: tuple[str, ...]) -> str:
    """The program, once it and every language pack are there; ``unsupported_media`` saying which is not."""
    program = command()
    if program is None:
        raise UnsupportedMedia("no OCR engine is installed (Tesseract: Debian's tesseract-ocr)")
    missing = [name for name in languages if name not in installed_languages(program)]
    if missing:
        packs = ", ".join(f"tesseract-ocr-{name.replace('_', '-').lower()}" for name in missing)
        raise UnsupportedMedia(
            f"the OCR language pack {'+'.join(missing)} is not installed (Debian: {packs})"
        )
    return program


class Word(NamedTuple):
    text: str
    box: tuple[int, int, int, int]
    """``x, y, w, h`` in the pixels of the image read."""
    confidence: float
    """0-1, Tesseract's own (its 0-100 divided by 100)."""


class Line(NamedTuple):
    """One line of words, in the block and paragraph Tesseract put it in (its reading order)."""

    block: int
    paragraph: int
    words: tuple[Word, ...]


def parse_tsv(tsv: str) -> list[Line]:
    """The lines of words of Tesseract's TSV, in its order; rows that are not words, and words of only
    spaces, are left out. A row that is not twelve tab-separated fields is ``media_invalid``."""
    lines: list[Line] = []
    current: tuple[str, str, str, str] | None = None
    words: list[Word] = []
    rows = tsv.splitlines()
    for row in rows[1:] if rows and rows[0].startswith("level") else rows:
        if not row:
            continue
        fields = row.split("\t")
        if len(fields) < _FIELDS - 1:
            raise MediaInvalid("the OCR engine's answer could not be read")
        if fields[0] != _WORD_LEVEL:
            continue
        text = fields[11].strip() if len(fields) >= _FIELDS else ""
        if not text:
            continue
        try:
            left, top, width, height = (int(value) for value in fields[6:10])
            confidence = min(1.0, max(0.0, float(fields[10]) / 100))
        except ValueError:
            raise MediaInvalid("the OCR engine's answer could not be read") from None
        key = (fields[1], fields[2], fields[3], fields[4])
        if key != current and words:
            lines.append(Line(int(current[1]), int(current[2]), tuple(words)))  # type: ignore[index]
            words = []
        current = key
        words.append(Word(text, (left, top, width, height), round(confidence, 4)))
    if words and current is not None:
        lines.append(Line(int(current[1]), int(current[2]), tuple(words)))
    return lines


def read_words(program: str, image: Any, languages: tuple[str, ...]) -> list[Line]:
    """The lines of words ``program`` reads on ``image`` (a PIL image); ``media_invalid`` when it fails on
    it."""
    import os
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory(prefix="ocr-") as scratch:
        png = os.path.join(scratch, "image.png")
        image.save(png, format="PNG")
        done = subprocess.run(
            [program, png, "stdout", "-l", "+".join(languages), "tsv"], capture_output=True, check=False
        )
    if done.returncode != 0:
        raise MediaInvalid("the OCR engine could not read the image")
    return parse_tsv(done.stdout.decode("utf-8", errors="replace"))


def read_document(
    program: str,
    image: Any,
    languages: tuple[str, ...],
    *,
    origin: tuple[int, int] = (0, 0),
    scale: float = 1.0,
) -> dict[str, Any]:
    """What ``program`` reads on ``image`` as an OCR document: its lines in reading order, each with its
    block, paragraph, box, confidence (the mean of its words') and words (text, box, confidence). Boxes are
    ``[x, y, w, h]`` in the original's pixels: the image read is ``scale`` times the original's part that
    starts at ``origin``."""

    def box(found: tuple[int, int, int, int]) -> list[int]:
        x, y, w, h = found
        return [
            origin[0] + round(x / scale),
            origin[1] + round(y / scale),
            max(1, round(w / scale)),
            max(1, round(h / scale)),
        ]

    lines: list[dict[str, Any]] = []
    for line in read_words(program, image, languages):
        words = [(plain_text(word.text), box(word.box), word.confidence) for word in line.words]
        words = [word for word in words if word[0].strip()]
        if not words:
            continue
        left = min(found[0] for _, found, _ in words)
        top = min(found[1] for _, found, _ in words)
        right = max(found[0] + found[2] for _, found, _ in words)
        bottom = max(found[1] + found[3] for _, found, _ in words)
        lines.append(
            {
                "block": line.block,
                "paragraph": line.paragraph,
                "box": [left, top, right - left, bottom - top],
                "confidence": round(sum(confidence for _, _, confidence in words) / len(words), 4),
                "words": [
                    {"text": text, "box": found, "confidence": confidence}
                    for text, found, confidence in words
                ],
            }
        )
    return {"engine": version(program), "languages": "+".join(languages), "lines": lines}

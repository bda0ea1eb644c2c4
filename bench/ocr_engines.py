"""OCR engines on real screenshots: word recall and precision against the page's own text, how many wrong
words a confidence under 0.9 catches, and the time an image takes.

Standalone (imports nothing of the other bench scripts). Each screenshot is a PNG beside a ``.txt`` of the
words the page shows in that viewport (``tests/views/js/screenshot.mjs`` makes both with headless Chromium).
Tesseract runs as the store runs it (:func:`blobstore.views.kinds.ocr.image_ocr`, the languages of
``--languages``); RapidOCR (``rapidocr-onnxruntime``, not a dependency of the project) runs in the Python
that ``--rapidocr-python`` names, when given. Chinese pages (a file name starting ``zh``) are scored by
characters, since their words are not spaced.

    node tests/views/js/screenshot.mjs shot.json          # {chromium, url, png, text, width, height, scale}
    .venv/bin/python bench/ocr_engines.py shots/*.png --rapidocr-python /path/to/venv/bin/python
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

from blobstore.views.kinds import ocr

RAPIDOCR = """
import json, sys
from rapidocr_onnxruntime import RapidOCR
engine = RapidOCR()
result, _ = engine(sys.argv[1])
print(json.dumps([[text, float(score)] for _, text, score in (result or [])]))
"""


def tokens(text: str, chinese: bool) -> list[str]:
    if chinese:
        return [char for char in text if not char.isspace()]
    return text.split()


def score(read: list[tuple[str, float]], truth: list[str], chinese: bool) -> dict[str, Any]:
    """Recall and precision of the words (or characters) read, and how the 0.9 flag splits right and wrong."""
    expected = Counter(truth)
    words = [(token, confidence) for text, confidence in read for token in tokens(text, chinese)]
    got = Counter(token for token, _ in words)
    right = sum((got & expected).values())
    left = Counter(expected)
    flagged_wrong = flagged_right = wrong = 0
    for token, confidence in words:
        ok = left[token] > 0
        if ok:
            left[token] -= 1
        else:
            wrong += 1
        if confidence < 0.9:
            if ok:
                flagged_right += 1
            else:
                flagged_wrong += 1
    return {
        "recall": round(right / max(1, len(truth)), 3),
        "precision": round(right / max(1, len(words)), 3),
        "wrong_flagged": round(flagged_wrong / max(1, wrong), 3),
        "right_flagged": round(flagged_right / max(1, len(words) - wrong), 3),
    }


def tesseract(png: Path, languages: list[str]) -> list[tuple[str, float]]:
    ((_, data),) = ocr.image_ocr(str(png), None, languages).parts
    document = json.loads(data)
    return [(word["text"], word["confidence"]) for line in document["lines"] for word in line["words"]]


def rapidocr(png: Path, python: str) -> list[tuple[str, float]]:
    done = subprocess.run([python, "-c", RAPIDOCR, str(png)], capture_output=True, check=True)
    return [(text, confidence) for text, confidence in json.loads(done.stdout)]


def main(shots: list[Path], languages: list[str], rapid_python: str | None) -> None:
    rows: dict[str, dict[str, Any]] = {}
    for png in shots:
        truth_text = png.with_suffix(".txt").read_text()
        chinese = png.name.startswith("zh")
        truth = tokens(truth_text, chinese)
        engines: dict[str, Any] = {
            "tesseract": lambda png=png, chinese=chinese: tesseract(
                png, ["chi_sim"] if chinese else languages
            )
        }
        if rapid_python:
            engines["rapidocr"] = lambda png=png: rapidocr(png, rapid_python)
        for name, run in engines.items():
            started = time.perf_counter()
            read = run()
            seconds = time.perf_counter() - started
            rows.setdefault(png.name, {})[name] = {
                **score(read, truth, chinese),
                "seconds": round(seconds, 2),
                "truth": len(truth),
            }
    print(json.dumps(rows, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("shots", nargs="+", type=Path, help="PNG screenshots, each beside its .txt")
    parser.add_argument("--languages", default="eng", help="Tesseract packs for the pages not in Chinese")
    parser.add_argument("--rapidocr-python", default=None, help="a Python with rapidocr-onnxruntime")
    options = parser.parse_args()
    main(options.shots, options.languages.split("+"), options.rapidocr_python)

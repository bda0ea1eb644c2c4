"""Text views hold text and line feeds, nothing else: no C0 control character reaches a model or a client.

A decoder's text can carry them: PDFium marks a word broken at a line end with U+0002, Tesseract ends a page
with a form feed, a PDF's text layer holds whatever its producer wrote (tabs, vertical tabs, stray NULs).
"""

from __future__ import annotations

import re
from typing import Final

_LINE_BREAKS: Final = re.compile(r"\r\n?|[\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
"""Line ends however they are written (CR LF, CR, vertical tab, form feed, the Unicode separators)."""
_CONTROLS: Final = re.compile(r"[\x00-\x08\x0e-\x1b\x1f\x7f]")


def plain_text(text: str) -> str:
    """``text`` with every line end a line feed, a tab a space, and the other C0 controls (and DEL)
    removed."""
    return _CONTROLS.sub("", _LINE_BREAKS.sub("\n", text).replace("\t", " "))

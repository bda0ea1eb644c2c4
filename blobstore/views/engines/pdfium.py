"""PDFium (``pypdfium2``): a PDF's page count, a page's text layer, a page rendered to pixels.

:func:`open_pdf` gives a :class:`Pdf` for the length of a ``with`` block; every page it loads is closed again
before its method returns, so a job holds one page at a time however long the document.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final

from blobstore.errors import MediaInvalid

_PASSWORD_ERROR: Final = 4
_BROKEN_WORD: Final = re.compile(r"\x02(?:\r?\n)?")
"""PDFium's mark of a word hyphenated at a line end (U+0002 where the hyphen was, ``iden\x02tifier``), with
the line break after it if it keeps one: removed, so the word is whole again as ``pdftotext`` gives it."""


class Pdf:
    """An open PDF document."""

    def __init__(self, document: Any) -> None:
        self._document = document

    def page_count(self) -> int:
        count = len(self._document)
        if count <= 0:
            raise MediaInvalid("the PDF has no pages (its page tree is empty or broken)")
        return int(count)

    def check_page(self, number: int, count: int) -> None:
        if not 1 <= number <= count:
            raise MediaInvalid(f"page {number} is past the PDF's last page ({count})")

    def _page(self, number: int) -> Any:
        import pypdfium2 as pdfium

        try:
            return self._document[number - 1]
        except (pdfium.PdfiumError, IndexError):
            raise MediaInvalid(f"page {number} of the PDF could not be loaded") from None

    def text(self, number: int) -> str:
        """The text layer of page ``number`` (empty for a page without one), a word hyphenated at a line end
        joined as ``pdftotext`` joins it (``identifier.``, not PDFium's ``iden\x02tifier.``)."""
        page = self._page(number)
        try:
            textpage = page.get_textpage()
            try:
                text = str(textpage.get_text_bounded())
                return _BROKEN_WORD.sub("", text).replace("\r\n", "\n").strip()
            finally:
                textpage.close()
        finally:
            page.close()

    def render(self, number: int, scale_for: Callable[[float], float], *, grayscale: bool = False) -> Any:
        """Page ``number`` rendered at ``scale_for(its longer side in points)``, as a PIL image."""
        page = self._page(number)
        try:
            width_pt, height_pt = page.get_size()
            if width_pt <= 0 or height_pt <= 0:
                raise MediaInvalid(f"page {number} has no area")
            bitmap = page.render(scale=scale_for(max(width_pt, height_pt)), grayscale=grayscale)
            try:
                return bitmap.to_pil()
            finally:
                bitmap.close()
        finally:
            page.close()


@contextmanager
def open_pdf(path: str) -> Iterator[Pdf]:
    """The PDF at ``path``; ``media_invalid`` for one that is damaged, not a PDF, or locked by a password."""
    import pypdfium2 as pdfium

    try:
        document = pdfium.PdfDocument(path)
    except pdfium.PdfiumError as exc:
        if exc.err_code == _PASSWORD_ERROR:
            raise MediaInvalid("the PDF is encrypted with a password") from None
        raise MediaInvalid("the PDF could not be opened: it is damaged or not a PDF") from None
    try:
        yield Pdf(document)
    finally:
        document.close()

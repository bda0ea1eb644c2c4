"""A page's text reads as ``pdftotext`` (poppler) reads it, on a real manual: Debian's ``libtasn1.pdf``, whose
words TeX broke at line ends, which PDFium marks with a raw U+0002 (``iden\\x02tifier.``)."""

from __future__ import annotations

import re
import subprocess
from collections import Counter

import httpx
import pytest
from mcp.types import TextContent

from blobstore.views.kinds import pages as jobs
from tests.views.conftest import LIBTASN1_PDF, MediaSet, connect

CONTROLS = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")
"""Every C0 control character (and DEL) but the line feed."""


def pdftotext(page: int) -> str:
    done = subprocess.run(
        ["pdftotext", "-f", str(page), "-l", str(page), str(LIBTASN1_PDF), "-"],
        capture_output=True,
        check=True,
    )
    return done.stdout.decode("utf-8")


async def test_page_7_reads_word_for_word_as_pdftotext_reads_it(media_set: MediaSet, views_http: str) -> None:
    pdf = media_set.ids["libtasn1.pdf"]
    async with httpx.AsyncClient(base_url=views_http, timeout=60) as http:
        response = await http.get(f"/v1/artifacts/{pdf}/pages/7.txt")
    assert response.status_code == 200
    text = response.text
    assert CONTROLS.search(text) is None, CONTROLS.findall(text)
    assert "identifier." in text.split()
    expected = Counter(pdftotext(7).split())
    assert sum(expected.values()) == 149
    assert Counter(text.split()) == expected


async def test_read_artifact_gives_the_joined_words_too(
    media_set: MediaSet, request: pytest.FixtureRequest
) -> None:
    async with connect("memory", media_set, request) as client:
        result = await client.call_tool(
            "read_artifact", {"uri": f"blobstore://artifacts/{media_set.ids['libtasn1.pdf']}", "pages": "11"}
        )
    assert not result.is_error, result.content
    page = result.content[1]
    assert isinstance(page, TextContent)
    assert CONTROLS.search(page.text) is None
    words = page.text.split()
    assert {"declarations.", "containing", "created"} <= set(words)


def test_no_page_of_the_manual_holds_a_control_character_but_the_line_feed() -> None:
    decoded = jobs.pdf_pages_text(str(LIBTASN1_PDF), list(range(1, 37)))
    broken = {meta["page"]: CONTROLS.findall(data.decode()) for meta, data in decoded.parts}
    assert {page: found for page, found in broken.items() if found} == {}
    # Every page but the table of contents and the index (dot leaders) has pdftotext's words.
    for meta, data in decoded.parts:
        if meta["page"] not in (3, 35, 36):
            assert Counter(data.decode().split()) == Counter(pdftotext(meta["page"]).split()), meta["page"]

"""Content-Disposition values: a safe ASCII fallback plus the exact name, for every name."""

from __future__ import annotations

import re
from urllib.parse import unquote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from blobstore.disposition import content_disposition

# RFC 9110 §5.6.4 quoted-string: qdtext (no quote, no backslash, no control) or a quoted-pair.
QUOTED_STRING = re.compile(r'"(?:[\t !#-\[\]-~]|\\[\t -~])*"')
VALUE = re.compile(
    rf"attachment; filename=(?P<fallback>{QUOTED_STRING.pattern}); filename\*=UTF-8''(?P<ext>\S*)"
)
# RFC 8187 §3.2.1 value-chars: attr-char or a pct-encoded byte.
EXT_VALUE = re.compile(r"(?:[A-Za-z0-9!#$&+\-.^_`|~]|%[0-9A-F]{2})+")


def without_controls(name: str) -> str:
    return "".join(ch for ch in name if ord(ch) >= 0x20 and ord(ch) != 0x7F)


@given(st.text())
def test_every_name_gives_a_well_formed_value_carrying_the_name(name: str) -> None:
    value = content_disposition(name)
    assert value.isascii()
    assert not any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value)
    match = VALUE.fullmatch(value)
    assert match is not None
    assert EXT_VALUE.fullmatch(match["ext"]) is not None
    assert unquote(match["ext"]) == (without_controls(name) or "download")


@given(st.text())
def test_the_fallback_is_printable_ascii_without_path_separators(name: str) -> None:
    match = VALUE.fullmatch(content_disposition(name))
    assert match is not None
    fallback = re.sub(r"\\(.)", r"\1", match["fallback"][1:-1])
    assert fallback
    assert all(0x20 <= ord(ch) < 0x7F for ch in fallback)
    assert "/" not in fallback
    assert "\\" not in fallback


@pytest.mark.parametrize(
    ("name", "fallback", "extended"),
    [
        ('Bericht "Q3" ü.txt', 'Bericht \\"Q3\\" u.txt', "Bericht%20%22Q3%22%20%C3%BC.txt"),
        ("back\\slash.txt", "back_slash.txt", "back%5Cslash.txt"),
        ("../../etc/passwd", ".._.._etc_passwd", "..%2F..%2Fetc%2Fpasswd"),
        ("line\r\nSet-Cookie: a=b", "line__Set-Cookie: a=b", "lineSet-Cookie%3A%20a%3Db"),
        ("报告.pdf", "__.pdf", "%E6%8A%A5%E5%91%8A.pdf"),
        ("", "download", "download"),
    ],
)
def test_quotes_backslashes_controls_and_non_ascii_are_escaped(
    name: str, fallback: str, extended: str
) -> None:
    assert content_disposition(name) == f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{extended}"


def test_the_disposition_type_is_the_callers() -> None:
    assert content_disposition("a.txt", "inline").startswith('inline; filename="a.txt"')

"""``Content-Disposition`` values (RFC 6266), for the HTTP edge and for presigned S3 downloads alike.

A value carries the name twice: ``filename`` as a quoted ASCII fallback for old clients, and ``filename*`` as
the exact name in UTF-8, percent-encoded (RFC 8187). Control characters never reach either form, so no name
can split a header or smuggle another one.
"""

from __future__ import annotations

import unicodedata
from typing import Final
from urllib.parse import quote

# RFC 8187 §3.2.1 attr-char, the characters that may stay unencoded in ``filename*``.
_ATTR_CHAR_SAFE: Final = "!#$&+-.^_`|~"
_FALLBACK_NAME: Final = "download"


def _is_control(ch: str) -> bool:
    return ord(ch) < 0x20 or ord(ch) == 0x7F


def _ascii_fallback(name: str) -> str:
    # Accents are dropped rather than replaced ("ü" becomes "u"), so the fallback stays readable.
    chars = []
    for ch in unicodedata.normalize("NFKD", name):
        if unicodedata.combining(ch):
            continue
        chars.append("_" if _is_control(ch) or ord(ch) > 0x7E or ch in "/\\" else ch)
    text = "".join(chars).strip() or _FALLBACK_NAME
    # RFC 6266 §4.1: filename is a quoted-string, so backslash and quote are escaped.
    return text.replace("\\", "\\\\").replace('"', '\\"')


def content_disposition(name: str, disposition: str = "attachment") -> str:
    """RFC 6266 ``Content-Disposition`` with both ``filename`` (ASCII) and ``filename*`` (UTF-8).

    RFC 6266 §4.3: "when both "filename" and "filename*" are present in a single header field value,
    recipients SHOULD pick "filename*" and ignore "filename"" — so old clients get a readable fallback and new
    ones the exact name.
    """
    fallback = _ascii_fallback(name)
    clean = "".join(ch for ch in name if not _is_control(ch)) or _FALLBACK_NAME
    encoded = quote(clean, safe=_ATTR_CHAR_SAFE)
    return f"{disposition}; filename=\"{fallback}\"; filename*=UTF-8''{encoded}"

"""The headers every page the server renders carries: the console's pages and ``/docs`` alike.

A strict Content-Security-Policy (scripts, styles and everything else from this origin only, no inline script
or style, no framing, forms to this origin only), ``nosniff``, ``X-Frame-Options: DENY``, and a referrer and
opener policy of this origin only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from starlette.datastructures import MutableHeaders

PAGE_POLICY: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; media-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
DOCS_POLICY: Final = PAGE_POLICY.replace("img-src 'self' blob:", "img-src 'self' blob: data:")
"""``/docs``: the same, except that images may also be ``data:`` URLs, as Swagger UI's stylesheet draws its
icons (an image runs no script)."""
STATIC_HEADERS: Final[Mapping[str, str]] = {
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    # Not no-referrer: under it a browser sends "Origin: null" with its own forms, which look foreign then.
    "referrer-policy": "same-origin",
    "cross-origin-opener-policy": "same-origin",
}


def fence(headers: MutableHeaders, policy: str = PAGE_POLICY) -> None:
    """Put the policy (unless the response set its own) and the static headers on a response's headers."""
    if "content-security-policy" not in headers:
        headers["content-security-policy"] = policy
    for name, value in STATIC_HEADERS.items():
        headers[name] = value

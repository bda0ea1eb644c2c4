"""The console's login: the API token in an ``HttpOnly``, ``SameSite=Strict`` cookie, and CSRF tokens.

The cookie holds the bearer token itself (or, in local mode, ``local.<random>``), so the console has exactly
the token's namespace and scopes, checked by the same authenticator as the API, and logging out or revoking
the token ends the session. Every change (a form POST of the console, or a non-GET call through the bridge to
the API) carries a CSRF token, an HMAC of the cookie under a server key that a page of another site can
neither read nor compute, and is refused when the browser says it comes from another origin.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from starlette.requests import HTTPConnection

from blobstore.api.console.state import ConsoleState, console_state
from blobstore.api.deps import app_state
from blobstore.errors import CsrfRejected, Unauthorized
from blobstore.models import Caller

COOKIE_NAME: Final = "blobstore_console"
LOCAL_PREFIX: Final = "local."
CSRF_HEADER: Final = "x-csrf-token"
CSRF_FIELD: Final = "csrf"
COOKIE_PATH: Final = "/console"


class LoginRequired(Exception):
    """No valid console session: the page answers with the login form instead."""


@dataclass(frozen=True, slots=True)
class Session:
    cookie: str
    caller: Caller
    csrf: str

    @property
    def is_local(self) -> bool:
        return self.cookie.startswith(LOCAL_PREFIX)


def new_local_cookie() -> str:
    return LOCAL_PREFIX + secrets.token_urlsafe(24)


def authorization_for(cookie: str) -> str | None:
    """The ``Authorization`` value the cookie stands for; None in local mode (a request without a token)."""
    if cookie.startswith(LOCAL_PREFIX):
        return None
    return f"Bearer {cookie}"


def csrf_for(key: bytes, cookie: str) -> str:
    return hmac.new(key, cookie.encode("utf-8"), hashlib.sha256).hexdigest()


def check_origin(headers: Mapping[str, str], own_origin: str) -> None:
    """Refuse a change the browser says comes from another site (``Origin``, else ``Sec-Fetch-Site``)."""
    origin = headers.get("origin")
    if origin is not None and origin != "null":
        if origin.rstrip("/").lower() != own_origin.lower():
            raise CsrfRejected()
        return
    if origin == "null" or headers.get("sec-fetch-site") in {"cross-site", "same-site"}:
        raise CsrfRejected()


def origin_of(connection: HTTPConnection) -> str:
    url = urlsplit(str(connection.url))
    return f"{url.scheme}://{url.netloc}"


async def check_csrf(
    state: ConsoleState, connection: HTTPConnection, cookie: str, presented: str | None
) -> None:
    check_origin(connection.headers, origin_of(connection))
    expected = csrf_for(await state.csrf_key(), cookie)
    if presented is None or not hmac.compare_digest(expected.encode(), presented.encode("utf-8", "replace")):
        raise CsrfRejected()


async def open_session(connection: HTTPConnection) -> Session:
    """The console session of this request; :class:`LoginRequired` without a valid one."""
    cookie = connection.cookies.get(COOKIE_NAME)
    if not cookie:
        raise LoginRequired()
    authenticator = app_state(connection.app).runtime.authenticator
    client = connection.client.host if connection.client else None
    try:
        caller = await authenticator.authenticate(authorization_for(cookie), client_host=client)
    except Unauthorized as exc:  # unknown, expired or revoked token, or local mode ended: log in again
        raise LoginRequired() from exc
    state = console_state(connection.app)
    return Session(cookie=cookie, caller=caller, csrf=csrf_for(await state.csrf_key(), cookie))

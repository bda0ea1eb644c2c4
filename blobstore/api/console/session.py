"""The console's login on the browser's side: the session cookie, and the CSRF check of every change.

The cookie carries only the id of a session the metadata database keeps (:mod:`blobstore.console_sessions`);
the session knows the token it acts as, its own CSRF token and its ends. Its name and attributes depend on the
scheme the browser sees:

- over HTTPS (``BLOBSTORE_PUBLIC_URL`` is ``https://…``, or the request came over TLS): ``__Host-
  blobstore_console``, ``Secure``, ``Path=/``, no ``Domain``. A browser takes a ``__Host-`` cookie only from
  a secure origin of the very host, with exactly those attributes, so no plain-HTTP page of the host (another
  port) and no sibling domain can set one beside it;
- over plain HTTP (the default on loopback): ``blobstore_console``, ``Path=/console``, since a browser refuses
  a ``__Host-`` cookie without ``Secure``, and a ``Secure`` cookie is not kept from a plain-HTTP page on every
  host. Cookies do not keep ports apart, so a page on another port of the host can set a cookie of this name
  too. When a request carries two, neither is trusted: it is logged out, both sessions are ended and every
  cookie of the name the request could carry is cleared, and the login page says why.

Both are ``HttpOnly`` and ``SameSite=Strict``. Every change (a form of the console, or a non-GET call through
the bridge to the API) carries the session's CSRF token, which a page of another site can neither read nor
guess. A change a page of another origin sends is refused before it gets here, by the request guard in front
of every route (``blobstore.api.request_guard``), the login form included.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from starlette.requests import HTTPConnection
from starlette.responses import Response

from blobstore.api.deps import app_state
from blobstore.console_sessions import OpenSession
from blobstore.errors import CsrfRejected

COOKIE_NAME: Final = "blobstore_console"
SECURE_COOKIE_NAME: Final = "__Host-blobstore_console"
COOKIE_PATH: Final = "/console"
CSRF_HEADER: Final = "x-csrf-token"
CSRF_FIELD: Final = "csrf"

Session = OpenSession

ENDED: Final = "ended"
"""A session cookie that opens nothing (logged out, ended by time, its token revoked or expired)."""
TWO_COOKIES: Final = "cookies"
"""Two session cookies in one request: another page of the host set one."""


class LoginRequired(Exception):
    """No valid console session: the page answers with the login form instead (``reason`` says why, for the
    login page; ``clear`` names the cookie paths to clear)."""

    def __init__(self, reason: str | None = None, clear: tuple[str, ...] = ()) -> None:
        super().__init__(reason)
        self.reason = reason
        self.clear = clear


@dataclass(frozen=True, slots=True)
class CookiePolicy:
    name: str
    path: str
    secure: bool


def cookie_policy(connection: HTTPConnection) -> CookiePolicy:
    """The session cookie's name and attributes for the scheme this request's browser sees."""
    public = app_state(connection.app).settings.public_url or ""
    if urlsplit(public).scheme == "https" or connection.url.scheme == "https":
        return CookiePolicy(SECURE_COOKIE_NAME, "/", secure=True)
    return CookiePolicy(COOKIE_NAME, COOKIE_PATH, secure=False)


def cookie_values(headers: Iterable[tuple[str, str]], name: str) -> list[str]:
    """Every value of cookie ``name`` in the request's headers, in order (a parsed jar keeps one of each
    name)."""
    values = []
    for header, text in headers:
        if header.lower() != "cookie":
            continue
        for part in text.split(";"):
            key, sep, value = part.strip().partition("=")
            if sep and key == name:
                values.append(value.strip().strip('"'))
    return values


def paths_reaching(path: str) -> tuple[str, ...]:
    """Every cookie path a browser sends a cookie of to ``path`` (RFC 6265 §5.1.4): the cookies of those paths
    are all the cookies of a name a request for ``path`` can carry."""
    found = ["/"]
    at = 0
    while (at := path.find("/", at + 1)) != -1:
        found += [path[:at], path[: at + 1]]
    if path != "/":
        found.append(path)
    return tuple(dict.fromkeys(found))


def set_session_cookie(response: Response, policy: CookiePolicy, session_id: str) -> None:
    response.set_cookie(
        policy.name, session_id, httponly=True, samesite="strict", secure=policy.secure, path=policy.path
    )


def clear_session_cookies(response: Response, policy: CookiePolicy, paths: Iterable[str] = ()) -> None:
    """Expire the session cookie at its own path and at ``paths`` (where a tossed one may sit)."""
    for path in dict.fromkeys((policy.path, *paths)):
        response.delete_cookie(policy.name, path=path, secure=policy.secure, httponly=True, samesite="strict")


def check_csrf(session: Session, presented: str | None) -> None:
    if presented is None or not hmac.compare_digest(
        session.csrf.encode(), presented.encode("utf-8", "replace")
    ):
        raise CsrfRejected()


async def open_session(connection: HTTPConnection) -> Session:
    """The console session of this request; :class:`LoginRequired` without a valid one."""
    policy = cookie_policy(connection)
    values = cookie_values(connection.headers.items(), policy.name)
    if not values:
        raise LoginRequired()
    sessions = app_state(connection.app).runtime.console_sessions
    if len(values) > 1:
        # One of them was set by another page of this host, and which one is not known: trust neither.
        for value in values:
            await sessions.end_id(value)
        raise LoginRequired(TWO_COOKIES, paths_reaching(connection.url.path))
    client = connection.client.host if connection.client else None
    opened = await sessions.open(values[0], client_host=client)
    if opened is None:
        raise LoginRequired(ENDED)
    return opened

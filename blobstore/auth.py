"""Bearer tokens: minting, storage as a hash, and turning an ``Authorization`` header into a :class:`Caller`.

A token reads ``bst_<id>_<secret>``: the id (16 URL-safe characters) is public and names the token in listings
and in the audit log; the secret (32 random bytes, URL-safe) is shown once when the token is created and only
its SHA-256 is stored. Looking a token up by the hash of the presented secret needs no comparison of secrets
in Python, so there is nothing to time.

Local mode: while no token is active, a request without ``Authorization`` acts as ``Caller("default",
"local", all scopes)`` -- but only where local mode is allowed (the server binds a loopback address, or was
started with ``--insecure-no-auth``) and, unless that flag was given, only for clients connecting from a
loopback address, so a server started some other way on a public address is never open. As soon as one token
is active every request needs a valid one.
"""

from __future__ import annotations

import functools
import hashlib
import ipaddress
import re
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

import anyio

from blobstore.audit import AuditLog
from blobstore.clock import Clock, utcnow
from blobstore.config import Settings
from blobstore.errors import Forbidden, InvalidRequest, Unauthorized
from blobstore.models import Caller, Scope, TokenRecord
from blobstore.records import TokenLookup, TokenStore

TOKEN_PREFIX: Final = "bst_"  # noqa: S105 - a format marker, not a credential
TOKEN_ID_LENGTH: Final = 16
SECRET_BYTES: Final = 32
LOCAL_NAMESPACE: Final = "default"
LOCAL_ACTOR: Final = "local"
ANONYMOUS_ACTOR: Final = "anonymous"
ALL_SCOPES: Final = frozenset(Scope)
LOCAL_CALLER: Final = Caller(namespace=LOCAL_NAMESPACE, actor=LOCAL_ACTOR, scopes=ALL_SCOPES)
"""Who a request without a token is in local mode (immutable, so one value serves every request)."""
DEFAULT_CACHE_SECONDS: Final = 2.0

_NAMESPACE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_TOKEN_ID = re.compile(rf"[A-Za-z0-9_-]{{{TOKEN_ID_LENGTH}}}")
_SECRET = re.compile(r"[A-Za-z0-9_-]{43}")
_DURATION = re.compile(r"(\d{1,9})([smhdw])")
_UNIT_SECONDS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


@dataclass(frozen=True, slots=True)
class IssuedToken:
    """A new token: its record and the full ``bst_…`` string, which exists nowhere else after this."""

    record: TokenRecord
    token: str


def validate_namespace(value: str) -> str:
    if not _NAMESPACE.fullmatch(value):
        raise InvalidRequest("namespace must be 1-64 characters of A-Z a-z 0-9 . _ -, starting alphanumeric")
    return value


def parse_scopes(value: str | Iterable[str]) -> frozenset[Scope]:
    """``read,write`` (or an iterable of names) as scopes; at least one, each known."""
    names = value.split(",") if isinstance(value, str) else list(value)
    cleaned = [name.strip().lower() for name in names if name.strip()]
    known = {scope.value for scope in Scope}
    unknown = sorted(set(cleaned) - known)
    if unknown or not cleaned:
        raise InvalidRequest(f"scopes must be a comma-separated list of {', '.join(sorted(known))}")
    return frozenset(Scope(name) for name in cleaned)


def parse_expiry(value: str, now: datetime) -> datetime:
    """``30d`` / ``12h`` / ``45m`` / ``3600s`` / ``2w`` from now, or an ISO 8601 time (UTC if naive)."""
    text = value.strip()
    match = _DURATION.fullmatch(text)
    if match:
        moment = now + timedelta(seconds=int(match.group(1)) * _UNIT_SECONDS[match.group(2)])
    else:
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise InvalidRequest(
                "expiry must be a duration such as 30d, 12h, 45m, or an ISO 8601 time"
            ) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
    if moment <= now:
        raise InvalidRequest("expiry must be in the future")
    return moment


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("ascii")).hexdigest()


def is_token_id(value: str) -> bool:
    """True for text of a token id's form (which says nothing of whether the token exists)."""
    return _TOKEN_ID.fullmatch(value) is not None


def split_token(token: str) -> tuple[str, str] | None:
    """``(id, secret)`` of a well-formed token, else None. Split by length: the alphabet contains ``_``."""
    if not token.startswith(TOKEN_PREFIX):
        return None
    rest = token[len(TOKEN_PREFIX) :]
    token_id, sep, secret = rest[:TOKEN_ID_LENGTH], rest[TOKEN_ID_LENGTH : TOKEN_ID_LENGTH + 1], rest[17:]
    if sep != "_" or not _TOKEN_ID.fullmatch(token_id) or not _SECRET.fullmatch(secret):
        return None
    return token_id, secret


def bearer_token(authorization: str) -> str | None:
    """The credentials of ``Authorization: Bearer <token>`` (scheme case-insensitive), else None."""
    scheme, _, credentials = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    credentials = credentials.strip()
    return credentials or None


def is_loopback_client(host: str | None) -> bool:
    """True for loopback peers; None (a Unix socket or an in-process transport) is local too."""
    if host is None:
        return True
    return _is_loopback_host(host)


@functools.lru_cache(maxsize=1024)
def _is_loopback_host(host: str) -> bool:
    # Asked on every request without a token in local mode; parsing the address was most of that request's
    # authentication. A server sees few distinct peers, and the answer for an address never changes.
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"


def require_scope(caller: Caller, scope: Scope) -> Caller:
    """``caller`` if it holds ``scope``; else ``forbidden`` (the namespace is always the caller's own)."""
    if scope not in caller.scopes:
        raise Forbidden(f"this token lacks the '{scope.value}' scope", required_scope=scope.value)
    return caller


# -- token administration ---------------------------------------------------------------------------------


def _new_token_id() -> str:
    # One URL-safe id in 64 would begin with "-", which command lines read as an option ("blobstore token
    # revoke -LJ..."). Drawing again costs under a bit of the 96.
    while (token_id := secrets.token_urlsafe(12)).startswith("-"):
        pass
    return token_id


async def create_token(
    repo: TokenStore,
    *,
    namespace: str,
    scopes: frozenset[Scope],
    expires_at: datetime | None = None,
    description: str | None = None,
    now: datetime | None = None,
) -> IssuedToken:
    if not scopes:
        raise InvalidRequest("a token needs at least one scope")
    if description is not None and len(description) > 255:
        raise InvalidRequest("description must be at most 255 characters")
    token_id = _new_token_id()
    secret = secrets.token_urlsafe(SECRET_BYTES)
    record = TokenRecord(
        id=token_id,
        namespace=validate_namespace(namespace),
        scopes=scopes,
        description=description,
        created_at=now or utcnow(),
        expires_at=expires_at,
        revoked_at=None,
    )
    await repo.insert_token(record, hash_secret(secret))
    return IssuedToken(record=record, token=f"{TOKEN_PREFIX}{token_id}_{secret}")


def token_state(record: TokenRecord, now: datetime) -> str:
    if record.revoked_at is not None:
        return "revoked"
    if record.expires_at is not None and record.expires_at <= now:
        return "expired"
    return "active"


# -- authentication -----------------------------------------------------------------------------------------


class Authenticator:
    """Turns request credentials into a :class:`Caller` for one metadata repository.

    Whether any token is active is cached for ``cache_seconds`` (both answers), so requests in either mode
    cost one indexed lookup at most; tokens created or revoked through this object reset the cache at once,
    those created by another process are seen within ``cache_seconds``.
    """

    def __init__(
        self,
        repo: TokenLookup,
        *,
        allow_local: bool,
        require_loopback_client: bool = True,
        cache_seconds: float = DEFAULT_CACHE_SECONDS,
        audit: AuditLog | None = None,
        clock: Clock = utcnow,
    ) -> None:
        self.repo = repo
        self.allow_local = allow_local
        self.require_loopback_client = require_loopback_client
        self.cache_seconds = cache_seconds
        self.audit = audit or AuditLog()
        self.clock = clock
        self._has_tokens: bool | None = None
        self._checked_at = 0.0
        self._refreshing: anyio.Event | None = None

    @classmethod
    def for_settings(
        cls, settings: Settings, repo: TokenLookup, *, audit: AuditLog, clock: Clock
    ) -> Authenticator:
        """The authenticator a server with ``settings`` uses: local mode only where the settings allow it."""
        return cls(
            repo,
            allow_local=settings.binds_loopback_only or settings.insecure_no_auth,
            require_loopback_client=not settings.insecure_no_auth,
            cache_seconds=settings.auth_cache_seconds,
            audit=audit,
            clock=clock,
        )

    def forget(self) -> None:
        self._has_tokens = None

    def _cached(self) -> bool | None:
        if self._has_tokens is None or time.monotonic() - self._checked_at >= self.cache_seconds:
            return None
        return self._has_tokens

    async def has_tokens(self) -> bool:
        cached = self._cached()
        if cached is not None:
            return cached
        running = self._refreshing
        if running is not None:
            # Requests that find the answer stale together share one look-up rather than each making one.
            await running.wait()
            cached = self._cached()
            if cached is not None:
                return cached
            # That look-up failed (its caller got the error): this request asks again for itself.
        done = self._refreshing = anyio.Event()
        try:
            answer = await self.repo.count_tokens(now=self.clock()) > 0
            self._has_tokens = answer
            self._checked_at = time.monotonic()
        finally:
            if self._refreshing is done:
                self._refreshing = None
            done.set()
        return answer

    async def authenticate(self, authorization: str | None, *, client_host: str | None = None) -> Caller:
        if authorization is None:
            if await self.has_tokens():
                self._refuse(ANONYMOUS_ACTOR, "unauthorized")
                raise Unauthorized("a bearer token is required")
            if not self.allow_local or (self.require_loopback_client and not is_loopback_client(client_host)):
                # No token exists, yet local mode does not apply: nobody can get in until one is created.
                self._refuse(ANONYMOUS_ACTOR, "unauthorized")
                raise Unauthorized("a bearer token is required; create one with 'blobstore token create'")
            return LOCAL_CALLER
        token = bearer_token(authorization)
        parts = split_token(token) if token is not None else None
        if parts is None:
            self._refuse(ANONYMOUS_ACTOR, "unauthorized")
            raise Unauthorized("malformed bearer token")
        token_id, secret = parts
        record = await self.repo.find_token(hash_secret(secret))
        if record is None or record.id != token_id:
            self._refuse(ANONYMOUS_ACTOR, "unauthorized")
            raise Unauthorized("unknown bearer token")
        state = token_state(record, self.clock())
        if state != "active":
            self._refuse(record.id, "unauthorized", namespace=record.namespace)
            raise Unauthorized(f"bearer token is {state}")
        return Caller(
            namespace=record.namespace, actor=record.id, scopes=record.scopes, expires_at=record.expires_at
        )

    def _refuse(self, actor: str, result: str, *, namespace: str | None = None) -> None:
        self.audit.record(actor=actor, namespace=namespace, action="authenticate", result=result)

"""Request dependencies: the runtime's parts, the settings and the caller, each reached through one function.

Every dependency is a coroutine function, even where it does not await: FastAPI runs a plain function in
a worker thread, one thread hop per dependency per request.

Every route takes its :class:`~blobstore.models.Caller` from :func:`get_caller`, so authentication and the
scope check happen in one place for the whole API (MCP over HTTP uses the same authenticator).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from starlette.applications import Starlette

from blobstore.auth import require_scope
from blobstore.config import Settings
from blobstore.models import Caller, Scope
from blobstore.runtime import Runtime
from blobstore.service import ArtifactService

STATE_KEY = "blobstore"
SESSION_CALLER = "blobstore.console_caller"
"""The ASGI scope key under which the console's bridge hands its session's caller to the API routes (set by
the server alone: nothing a client sends reaches the scope's keys)."""


@dataclass(frozen=True, slots=True)
class AppState:
    """What the lifespan puts on ``app.state``: built once per running app, never at import."""

    settings: Settings
    runtime: Runtime

    @property
    def service(self) -> ArtifactService:
        return self.runtime.service


def app_state(app: Starlette) -> AppState:
    # Starlette's State keeps its attributes in its ``_state`` dict: a getattr of one first fails the usual
    # lookup, raising inside, at 0.7 µs (twice a range read). Read from the dict while it has that shape.
    values = getattr(app.state, "_state", None)
    state = values.get(STATE_KEY) if isinstance(values, dict) else getattr(app.state, STATE_KEY, None)
    if not isinstance(state, AppState):
        raise RuntimeError("the blobstore app is not started: run it under an ASGI server or its lifespan")
    return state


# The dependencies are coroutines because FastAPI runs a plain ``def`` one in a worker thread: a thread hop
# per dependency and request, for an attribute lookup.
async def get_state(request: Request) -> AppState:
    return app_state(request.app)


async def get_service(request: Request) -> ArtifactService:
    return app_state(request.app).service


async def get_runtime(request: Request) -> Runtime:
    return app_state(request.app).runtime


async def get_settings(request: Request) -> Settings:
    return app_state(request.app).settings


async def authenticate(request: Request) -> Caller:
    """Who is asking, from the bearer token (or local mode), or the console session the bridge found;
    ``unauthorized`` otherwise. No scope checked."""
    bridged = request.scope.get(SESSION_CALLER)
    if isinstance(bridged, Caller):
        return bridged
    authenticator = app_state(request.app).runtime.authenticator
    # Read off the scope: a Headers and an Address object per request cost more than the lookups themselves.
    scope = request.scope
    client = scope.get("client")
    authorization = next((value for name, value in scope["headers"] if name == b"authorization"), None)
    return await authenticator.authenticate(
        authorization.decode("latin-1") if authorization is not None else None,
        client_host=client[0] if client else None,
    )


def scope_for_method(method: str) -> Scope:
    return Scope.READ if method in {"GET", "HEAD"} else Scope.WRITE


async def get_caller(request: Request) -> Caller:
    """Who is asking, holding the scope the request's method needs: GET and HEAD read, every other method
    writes. A route needing more (admin) adds :func:`require`; the namespace is always the token's own.
    """
    return require_scope(await authenticate(request), scope_for_method(request.method))


def require(scope: Scope) -> Callable[[Request], Awaitable[Caller]]:
    """A dependency for a caller holding ``scope`` (for routes whose method does not say it, e.g. admin)."""

    async def dependency(request: Request) -> Caller:
        return require_scope(await authenticate(request), scope)

    return dependency


async def base_url(request: Request) -> str:
    """Where clients reach this server, for absolute links in responses."""
    configured = app_state(request.app).settings.public_url
    if configured:
        return configured.rstrip("/")
    return str(request.base_url).rstrip("/")


ServiceDep = Annotated[ArtifactService, Depends(get_service)]
RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
CallerDep = Annotated[Caller, Depends(get_caller)]
BaseUrlDep = Annotated[str, Depends(base_url)]

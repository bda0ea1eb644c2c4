"""Request dependencies: the service, the settings and the caller, each reached through one function.

Every route takes its :class:`~blobstore.models.Caller` from :func:`get_caller`, so authentication is added in
one place for the whole API.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from starlette.applications import Starlette

from blobstore.config import Settings
from blobstore.models import Caller
from blobstore.service import ArtifactService

STATE_KEY = "blobstore"


@dataclass(frozen=True, slots=True)
class AppState:
    """What the lifespan puts on ``app.state``: built once per running app, never at import."""

    settings: Settings
    service: ArtifactService


def app_state(app: Starlette) -> AppState:
    state = getattr(app.state, STATE_KEY, None)
    if not isinstance(state, AppState):
        raise RuntimeError("the blobstore app is not started: run it under an ASGI server or its lifespan")
    return state


def get_state(request: Request) -> AppState:
    return app_state(request.app)


def get_service(request: Request) -> ArtifactService:
    return app_state(request.app).service


def get_settings(request: Request) -> Settings:
    return app_state(request.app).settings


def get_caller(request: Request) -> Caller:
    """Who is asking. Without authentication every request acts in the ``default`` namespace."""
    return Caller(namespace="default", actor="local")


def base_url(request: Request) -> str:
    """Where clients reach this server, for absolute links in responses."""
    configured = app_state(request.app).settings.public_url
    if configured:
        return configured.rstrip("/")
    return str(request.base_url).rstrip("/")


ServiceDep = Annotated[ArtifactService, Depends(get_service)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
CallerDep = Annotated[Caller, Depends(get_caller)]
BaseUrlDep = Annotated[str, Depends(base_url)]

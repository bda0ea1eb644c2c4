"""The app factory: ``create_app(settings)`` builds the FastAPI app; its lifespan opens the runtime.

Nothing is built at import time. The lifespan opens the :class:`~blobstore.runtime.Runtime` (or composes one
around a given service) and keeps it in typed state (:class:`~blobstore.api.deps.AppState`). Extensions (the
MCP streamable-HTTP app) are mounted at their path and their lifespans entered with the runtime, since
Starlette does not run the lifespans of mounted apps.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from fastapi import FastAPI
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from blobstore import __version__
from blobstore.api.api_docs import install_docs
from blobstore.api.console import ConsoleBridge, ConsoleHeaders, install_console
from blobstore.api.cors import Cors
from blobstore.api.deps import STATE_KEY, AppState
from blobstore.api.errors import install_error_handlers, problem_response
from blobstore.api.guard import MULTIPART_ALLOWANCE, BodyGuard, MessageGuard
from blobstore.api.in_flight import InFlight
from blobstore.api.observe import Observe
from blobstore.api.openapi import install_openapi
from blobstore.api.request_guard import RequestGuard
from blobstore.api.routes import artifacts, health, metrics, tus, uploads, views
from blobstore.config import Settings
from blobstore.errors import StorageUnavailable
from blobstore.runtime import Runtime, compose, serve
from blobstore.service import ArtifactService

logger = logging.getLogger("blobstore.api")


class AppExtension(Protocol):
    @property
    def path(self) -> str:
        """Where to mount :attr:`app`, e.g. ``/mcp``."""
        ...

    @property
    def app(self) -> ASGIApp: ...

    def lifespan(self, runtime: Runtime) -> AbstractAsyncContextManager[None]:
        """Runs while the app runs, with what the composition root built (the service, the authenticator)."""
        ...


class BlobstoreAPI(FastAPI):
    """FastAPI, with one layer outside its whole middleware stack: the content reads
    (:class:`~blobstore.api.routes.artifacts.ContentReads`), which :func:`create_app` sets as ``outermost``.

    While FastAPI's own telemetry has nothing to report to (no OpenTelemetry provider: its check, about 4 µs,
    is made once a second), every HTTP request goes straight to that layer, which hands all but the content
    reads to the middleware stack exactly as ``Starlette.__call__`` would; with a provider, every request
    takes FastAPI's path and its span.
    """

    outermost: Callable[[ASGIApp], ASGIApp] | None = None
    _entry: ASGIApp | None = None
    _plain_until = 0.0
    _plain = False

    def build_middleware_stack(self) -> ASGIApp:
        stack = super().build_middleware_stack()
        self._entry = stack if self.outermost is None else self.outermost(stack)
        return self._entry

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.in_flight = InFlight()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        in_flight = self.in_flight
        if in_flight.closed:
            # The lifespan is closing the store (blobstore.api.in_flight): nothing of it is touched.
            await _stopping(scope, receive, send)
            return
        task = in_flight.enter()
        try:
            entry = self._entry
            if entry is not None and not self.root_path and self._telemetry_off():
                scope["app"] = self
                await entry(scope, receive, send)
            else:
                await super().__call__(scope, receive, send)
        except asyncio.CancelledError:
            if not in_flight.cancelled_by_drain(task):
                raise
            # The stop's drain cancelled it past the grace. Raised into the server, the cancellation would be
            # logged as the app's failure, with a traceback; it is the stop's doing, said in one line.
            logger.warning("stopping: %s %s was cancelled after the grace", scope["method"], scope["path"])
            if task is not None:
                task.uncancel()
        finally:
            in_flight.leave(task)

    def _telemetry_off(self) -> bool:
        now = time.monotonic()
        if now >= self._plain_until:
            telemetry = getattr(self, "_native_telemetry", None)  # FastAPI releases with native telemetry
            self._plain = telemetry is None or not telemetry.enabled()
            self._plain_until = now + 1.0
        return self._plain


async def _stopping(scope: Scope, receive: Receive, send: Send) -> None:
    response = problem_response(
        StorageUnavailable.code,
        title="the server is stopping",
        detail="try again: another replica, or this server once it is back",
        headers={"Retry-After": "1"},
    )
    await response(scope, receive, send)


def create_app(
    settings: Settings,
    *,
    service: ArtifactService | None = None,
    extensions: Sequence[AppExtension] = (),
) -> FastAPI:
    """The HTTP API. Given a ``service`` (tests), the lifespan uses it and leaves closing it to the caller."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            if service is None:
                runtime = await stack.enter_async_context(serve(settings))
            else:
                runtime = compose(service)
            for extension in extensions:
                await stack.enter_async_context(extension.lifespan(runtime))
            setattr(app.state, STATE_KEY, AppState(settings=settings, runtime=runtime))
            try:
                yield
            finally:
                # The requests in flight end (or are cancelled) before anything they use closes.
                assert isinstance(app, BlobstoreAPI)
                await app.in_flight.drain(settings.shutdown_grace_seconds)
                delattr(app.state, STATE_KEY)

    app = BlobstoreAPI(
        title="mcp-blobstore",
        version=__version__,
        summary="Chunked binary transfer and content-addressed resource store for MCP",
        lifespan=lifespan,
        openapi_url="/openapi.json",
        # Served from the package's own files (blobstore.api.api_docs), not FastAPI's CDN page.
        docs_url=None,
        redoc_url=None,
        # A path with an extra trailing slash is an unknown path (404), not a redirect to another URL.
        redirect_slashes=False,
    )
    install_error_handlers(app)
    install_openapi(app, settings)
    install_docs(app)
    body_cap = settings.max_artifact_size + MULTIPART_ALLOWANCE
    every_method_paths = [extension.path for extension in extensions]
    if settings.console_enabled:
        # The console's pages call the API under /console/api/ with the session cookie: inside the guards.
        app.add_middleware(ConsoleBridge)
    app.add_middleware(
        BodyGuard,
        timeout=settings.body_timeout_seconds,
        max_body=body_cap,
        min_rate=settings.min_body_rate,
        window=settings.min_body_rate_window_seconds,
    )
    app.add_middleware(MessageGuard)  # a malformed message never reaches the body guard
    # Every route, /mcp included: a foreign Host or a change sent by a page of another origin goes no further.
    app.add_middleware(RequestGuard, settings=settings, every_method_paths=every_method_paths)
    if settings.cors_origins:
        # Outside the guards, so that their refusals (400, 413, 408, 421, 403) reach the page too.
        app.add_middleware(Cors, origins=settings.cors_origins)
    # Outermost: ids, metrics and the access line cover every answer, the body guard's refusals included.
    app.add_middleware(Observe, routes=app.router.routes, access_log_level=settings.access_log_level)

    def content_reads(stack: ASGIApp) -> ASGIApp:
        # Outside everything, FastAPI's own layers included: GET and HEAD of the content, with the same
        # checks, ids, metrics and access line, and nothing else.
        guard = RequestGuard(stack, settings=settings, every_method_paths=every_method_paths)
        observe = Observe(stack, routes=[], access_log_level=settings.access_log_level)
        return artifacts.ContentReads(stack, settings=settings, guard=guard, observe=observe)

    app.outermost = content_reads
    if settings.console_enabled:
        app.add_middleware(ConsoleHeaders)
    app.include_router(health.router)
    app.include_router(uploads.router)
    app.include_router(artifacts.router)
    app.include_router(views.router)
    # Ahead of every FastAPI route: the single-request upload (POST of the artifacts collection) skips
    # FastAPI's request machinery; GET and HEAD of the content are answered by `ContentReads` (above).
    app.router.routes.insert(0, artifacts.UploadRoute())
    app.include_router(tus.router)
    if settings.metrics:
        app.include_router(metrics.router)
    if settings.console_enabled:
        install_console(app, settings)
    for extension in extensions:
        # The exact path as a route too: a bare Mount answers POST /mcp with a 307 to /mcp/.
        app.router.routes.append(Route(extension.path, endpoint=extension.app))
        app.mount(extension.path, extension.app)
    return app

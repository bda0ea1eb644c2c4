"""The web console at ``/console``: see, preview, upload, share and clean up artifacts in a browser.

Server-rendered pages (Jinja2 templates in ``templates/``) and one small script (``static/console.js``), all
shipped in the package: nothing comes from another origin. :func:`install_console` adds it to the app when
``BLOBSTORE_CONSOLE`` says so (on by default where the server binds loopback only). See ``docs/console.md``.
"""

from __future__ import annotations

from fastapi import FastAPI
from starlette.staticfiles import StaticFiles

from blobstore.api.console.edge import ConsoleBridge, ConsoleHeaders
from blobstore.api.console.routes import LoginRequired, login_redirect, router, share_router
from blobstore.api.console.state import STATE_KEY, ConsoleState
from blobstore.config import Settings

__all__ = ["ConsoleBridge", "ConsoleHeaders", "install_console"]


def install_console(app: FastAPI, settings: Settings) -> None:
    """The console's routes, files and state. Its two middlewares are placed by the app factory: the bridge
    inside the body guards (its requests are API requests), the headers outside everything."""
    setattr(app.state, STATE_KEY, ConsoleState(settings))
    app.add_exception_handler(LoginRequired, login_redirect)
    app.include_router(router)
    app.include_router(share_router)
    app.mount("/console/static", StaticFiles(packages=[("blobstore.api.console", "static")]), name="console")

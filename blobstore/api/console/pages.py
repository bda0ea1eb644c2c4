"""Rendering: the console's Jinja2 templates (shipped in the package), with autoescape on for every value."""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any
from urllib.parse import urlencode

import jinja2
from fastapi import Request
from fastapi.responses import HTMLResponse, Response
from fastapi.routing import APIRoute

from blobstore import metrics
from blobstore.api.console import present
from blobstore.api.console.session import CSRF_FIELD, Session
from blobstore.api.errors import on_blobstore_error, status_for
from blobstore.errors import BlobstoreError
from blobstore.models import Scope


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("blobstore.api.console", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["size"] = present.size_words
    env.filters["age"] = present.age_words
    env.filters["expiry"] = present.expiry_words
    env.filters["query"] = lambda values: urlencode({k: v for k, v in values.items() if v})
    env.globals["preview_kind"] = present.preview_kind
    env.globals["has_thumbnail"] = present.has_thumbnail
    return env


def render(
    request: Request, template: str, session: Session | None, *, status: int = 200, **context: Any
) -> HTMLResponse:
    caller = session.caller if session is not None else None
    page = (
        environment()
        .get_template(template)
        .render(
            session=session,
            caller=caller,
            csrf=session.csrf if session is not None else "",
            csrf_field=CSRF_FIELD,
            is_admin=caller is not None and Scope.ADMIN in caller.scopes,
            can_write=caller is not None and Scope.WRITE in caller.scopes,
            path=request.url.path,
            **{"outcome": {}, **context},
        )
    )
    return HTMLResponse(page, status_code=status)


def wants_html(request: Request) -> bool:
    """A browser's navigation or form post (``Accept: text/html``); not a script's ``fetch()`` or an image."""
    return "text/html" in request.headers.get("accept", "")


async def error_page(request: Request, exc: BlobstoreError) -> Response:
    """The error as a console page for a browser, with the same status and code as the API's problem (which
    scripts and other clients still get)."""
    if not wants_html(request):
        return await on_blobstore_error(request, exc)
    status = status_for(exc.code)
    if status >= 500:
        return await on_blobstore_error(request, exc)  # logged there; a page says no more than the problem
    metrics.count_error(exc.code, getattr(exc, "operation", None))
    detail = exc.message if exc.message != exc.default_message else None
    return render(
        request,
        "error.html",
        None,
        status=status,
        error_status=status,
        title=type(exc).default_message,
        code=exc.code,
        detail=detail,
    )


class ConsoleRoute(APIRoute):
    """A console route whose refusals reach a browser as a page (:func:`error_page`)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def answer(request: Request) -> Response:
            try:
                return await handler(request)
            except BlobstoreError as exc:
                return await error_page(request, exc)

        return answer

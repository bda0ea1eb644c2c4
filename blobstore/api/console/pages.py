"""Rendering: the console's Jinja2 templates (shipped in the package), with autoescape on for every value."""

from __future__ import annotations

import functools
from typing import Any
from urllib.parse import urlencode

import jinja2
from fastapi import Request
from fastapi.responses import HTMLResponse

from blobstore.api.console import present
from blobstore.api.console.session import CSRF_FIELD, Session
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
            **context,
        )
    )
    return HTMLResponse(page, status_code=status)

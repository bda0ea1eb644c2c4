"""Progress of a view call, told to the MCP client that asked for it.

The one place where the store's request handlers (``tools/call``, ``resources/read``) set the view
progress reporter (:mod:`blobstore.views.progress`) for their call: each page, frame or second a view
reports becomes a ``notifications/progress`` on the request's own session (the SDK sends it over stdio, on
the request's event stream over HTTP, or to the proxy's store server), none in the call's first second and
at most four a second. The SDK sends one only when the request carries a progress token (``_meta`` on the
wire, a callback in memory), so a call without one gets none.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from mcp.server import ServerRequestContext

from blobstore.views.progress import reporting, throttled


@contextlib.contextmanager
def view_progress(ctx: ServerRequestContext[Any, Any]) -> Iterator[None]:
    """Report the progress of the views computed inside this block to the request's client."""
    with reporting(throttled(ctx.session.report_progress)):
        yield

"""How the store's request handlers join a server that already has handlers of its own.

A request that names a URI goes to the store for ``blobstore://`` URIs and to the server's own handler for
any other (:func:`by_scheme`); a list the store adds to without paging comes after the server's own pages
(:func:`after_the_hosts`). Composite cursors say whose page comes next: :data:`HOST_CURSOR` then the host's
own cursor, :data:`STORE_CURSOR` then the store's (the embedding server and the proxy both page this way).
The server's own handlers are called as they are: their errors are theirs, not mapped by this package.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, Protocol, TypeVar

from mcp.server import ServerRequestContext
from mcp.server.lowlevel.server import HandlerEntry
from mcp.types import PaginatedRequestParams, PaginatedResult
from pydantic import BaseModel

from mcp_resources.uris import is_store_uri

HOST_CURSOR: Final = "h:"
STORE_CURSOR: Final = "s:"

Context = ServerRequestContext[Any, Any]
M = TypeVar("M", bound=BaseModel)
Page = TypeVar("Page", bound=PaginatedResult)


class NamesUri(Protocol):
    @property
    def uri(self) -> str: ...


Params = TypeVar("Params", bound=NamesUri)


def as_result(model: type[M], result: Any) -> M:
    """A handler's result as ``model`` (handlers may return the model or its wire dict)."""
    return result if isinstance(result, model) else model.model_validate(result)


def by_scheme(
    ours: Callable[[Context, Params], Awaitable[M]], theirs: HandlerEntry[Any] | None, result: type[M]
) -> Callable[[Context, Params], Awaitable[M]]:
    """``ours`` for store URIs (and for every URI when the server had no handler), else the server's own."""

    async def route(ctx: Context, params: Params) -> M:
        if theirs is None or is_store_uri(params.uri):
            return await ours(ctx, params)
        return as_result(result, await theirs.handler(ctx, params))

    return route


def after_the_hosts(
    ours: Callable[[Context, PaginatedRequestParams | None], Awaitable[Page]],
    theirs: HandlerEntry[Any] | None,
    result: type[Page],
    field: str,
    store_items: Callable[[], Sequence[Any]],
) -> Callable[[Context, PaginatedRequestParams | None], Awaitable[Page]]:
    """The server's own pages of a list, the store's items appended to its last; ``ours`` alone when the
    server had no such list."""

    async def listing(ctx: Context, params: PaginatedRequestParams | None) -> Page:
        if theirs is None:
            return await ours(ctx, params)
        page = as_result(result, await theirs.handler(ctx, params))
        if page.next_cursor is not None:
            return page
        return page.model_copy(update={field: [*getattr(page, field), *store_items()]})

    return listing

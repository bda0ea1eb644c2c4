"""MCP requests by method in the process's Prometheus metrics (``blobstore_mcp_requests_total``).

A context-tier middleware of the SDK's low-level server: it sees every inbound request, the handshake and
unknown methods included. Methods the server does not serve are counted as ``other``, so a client cannot grow
the label set.
"""

from __future__ import annotations

from typing import Any, Final

from mcp.server import Server, ServerRequestContext
from mcp.server.context import CallNext, HandlerResult

from blobstore import metrics

_ALWAYS: Final = frozenset({"initialize", "ping"})


class RequestMetrics:
    def __init__(self, server: Server[Any]) -> None:
        self._server = server

    def _label(self, method: str) -> str:
        if method in _ALWAYS or self._server.get_request_handler(method) is not None:
            return method
        return "other"

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.request_id is None:  # a notification, not a request
            return await call_next(ctx)
        label = self._label(ctx.method)
        try:
            result = await call_next(ctx)
        except BaseException:
            metrics.MCP_REQUESTS.labels(label, "error").inc()
            raise
        metrics.MCP_REQUESTS.labels(label, "ok").inc()
        return result


def install_request_metrics(server: Server[Any]) -> None:
    server.middleware.append(RequestMetrics(server))

"""What this package needs of the MCP SDK that the SDK does not make public, and the check that it is there.

The SDK is pinned to ``mcp>=2.3,<2.4``. Three things have no public accessor in that line:

* the client :class:`~mcp.server.connection.Connection` a low-level request arrived on (handshake-era feeds
  live on it: its ``state``, ``exit_stack`` and standalone channel); the runner hands handlers a
  ``ServerRequestContext`` whose session keeps it as ``_connection`` (the SDK's ``Context.connection`` is
  public, but the runner does not build a ``Context``);
* the low-level ``Server`` inside an ``MCPServer`` (``_lowlevel_server``, which the SDK's own in-memory client
  reads the same way);
* an ``MCPServer``'s subscription bus (``_subscriptions``), used only when the embedding server did not pass
  the bus it gave ``MCPServer(subscriptions=...)``;
* an ``MCPServer``'s registered tools (``_tool_manager``): a tool that returns typed media is run without the
  SDK's conversion of its result (``Tool.run(..., convert_result=False)``), so that the store answers it.

Everything else this package uses is public, though some of it provisional in 2.x (``Server.middleware``,
``mcp.server.context.CallNext``, ``mcp.shared.subscriptions``): :func:`check_sdk_shape` verifies those seams
too. It runs whenever a store server is built or embedded, so an SDK that moved one of these fails at start
with :class:`SdkShapeError` naming it, never later by quietly sending no notifications.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from mcp.server import MCPServer, Server, ServerRequestContext
from mcp.server.connection import Connection
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.tools import Tool, ToolManager
from mcp.server.session import ServerSession
from mcp.server.subscriptions import SubscriptionBus
from mcp.types import CallToolRequestParams

SUPPORTED_SDK: Final = "mcp>=2.3,<2.4"


class SdkShapeError(RuntimeError):
    """The installed MCP SDK lacks something this package relies on."""


@dataclass(frozen=True, slots=True)
class _Needed:
    owner: type[Any]
    name: str
    set_in_init: bool
    """An instance attribute assigned in ``__init__`` (checked there), rather than one on the class."""

    def present(self) -> bool:
        if self.set_in_init:
            init: Callable[..., Any] = self.owner.__init__
            code = getattr(init, "__code__", None)
            return code is not None and self.name in code.co_names
        return hasattr(self.owner, self.name)

    def __str__(self) -> str:
        return f"{self.owner.__module__}.{self.owner.__qualname__}.{self.name}"


_SET_IN_INIT: Final[dict[type[Any], tuple[str, ...]]] = {
    ServerSession: ("_connection",),  # private: read by connection_of
    # private: read by lowlevel_server, subscription_bus, registered_tool
    MCPServer: ("_lowlevel_server", "_subscriptions", "_tool_manager"),
    Connection: ("state", "exit_stack", "initialized"),  # what a handshake-era feed lives on
    Server: ("middleware", "lifespan"),  # provisional middleware chain; the lifespan feeds run in
}
_ON_CLASS: Final[dict[type[Any], tuple[str, ...]]] = {
    ToolManager: ("get_tool",),
    Tool: ("run",),
    Connection: ("has_standalone_channel", "send_resource_updated", "send_resource_list_changed"),
    Server: ("get_request_handler", "add_request_handler"),
}
NEEDED: Final = tuple(
    _Needed(owner, name, set_in_init)
    for table, set_in_init in ((_SET_IN_INIT, True), (_ON_CLASS, False))
    for owner, names in table.items()
    for name in names
)


def missing_from_sdk() -> list[str]:
    """What of :data:`NEEDED` the installed SDK lacks (empty when it has the shape relied on)."""
    return [str(needed) for needed in NEEDED if not needed.present()]


def check_sdk_shape() -> None:
    """Raise :class:`SdkShapeError` unless the installed SDK has everything this package relies on."""
    missing = missing_from_sdk()
    if missing:
        raise SdkShapeError(
            f"the installed MCP SDK lacks {', '.join(missing)}, which mcp_resources relies on; "
            f"install {SUPPORTED_SDK}"
        )


def connection_of(ctx: ServerRequestContext[Any, Any]) -> Connection:
    """The client connection a low-level request arrived on."""
    found = ctx.session._connection
    if not isinstance(found, Connection):
        raise SdkShapeError(f"a request's session has no Connection; install {SUPPORTED_SDK}")
    return found


def lowlevel_server(server: MCPServer) -> Server[Any]:
    """The low-level ``Server`` that serves an ``MCPServer``'s requests."""
    inner: Server[Any] = server._lowlevel_server
    return inner


def subscription_bus(server: MCPServer) -> SubscriptionBus:
    """The bus an ``MCPServer`` publishes its own list changes on (its listen streams' source)."""
    bus: SubscriptionBus = server._subscriptions
    return bus


def registered_tool(server: MCPServer, name: str) -> Tool | None:
    """The tool an ``MCPServer`` registered under ``name`` (its function and ``run``)."""
    manager: ToolManager = server._tool_manager
    return manager.get_tool(name)


def tool_context(
    server: MCPServer, ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
) -> Context[Any, Any]:
    """The ``Context`` an ``MCPServer`` gives a tool it runs for ``params``, as its own handler builds it."""
    return Context(
        request_context=ctx, mcp_server=server, input_params=params, subscriptions=subscription_bus(server)
    )

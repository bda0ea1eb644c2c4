"""The standalone MCP server: the store's resources and tools on the SDK's low-level ``Server``.

The low-level server (not ``MCPServer``) because listing must paginate with our own keyset cursors and carry
``size``. It serves both protocol eras the SDK speaks: the 2025-11-25 ``initialize`` handshake and the
stateless 2026-07-28 requests; only change notifications (:mod:`mcp_resources.transports.notifications`)
depend on a session or a listen stream.
"""

from __future__ import annotations

from typing import Any, Final

from mcp.server import Server, ServerRequestContext

from blobstore import __version__
from blobstore.models import Caller
from blobstore.service import ArtifactService
from mcp_resources.metrics import install_request_metrics
from mcp_resources.reading.resources import DEFAULT_PAGE_SIZE, CallerResolver, StoreResources
from mcp_resources.tools.files_capability import EXPERIMENTAL, FilesCapability
from mcp_resources.tools.tools import StoreTools
from mcp_resources.transports.notifications import StoreNotifications
from mcp_resources.transports.sdk_internals import check_sdk_shape
from mcp_resources.transports.stdio_reads import HandshakeReads

SERVER_NAME: Final = "mcp-blobstore"
INSTRUCTIONS: Final = (
    "Artifacts are exposed as resources blobstore://artifacts/{id}. Small ones read whole; read larger "
    "ones in "
    "byte windows blobstore://artifacts/{id}?offset=<o>&length=<n> (see resources/templates/list) and follow "
    "_meta['dev.blobstore/window'].next. Upload with upload_begin, upload_chunk, upload_commit."
)


def fixed_caller(caller: Caller) -> CallerResolver:
    """A resolver for transports with one principal (stdio, in-process, embedded tool servers)."""

    def resolve(ctx: ServerRequestContext[Any, Any]) -> Caller:
        return caller

    return resolve


def create_server(
    service: ArtifactService,
    *,
    caller_for: CallerResolver,
    tools: bool = True,
    page_size: int = DEFAULT_PAGE_SIZE,
    name: str = SERVER_NAME,
    session_subscriptions: bool = True,
) -> Server[Any]:
    """A low-level MCP server serving the store's resources (and, by default, the upload/read tools).

    Change notifications go to 2026-07-28 ``subscriptions/listen`` streams and, with
    ``session_subscriptions`` (pass False where handshake-era sessions have no standing channel, as on
    stateless HTTP), to handshake-era sessions through ``resources/subscribe`` and ``listChanged``.
    """
    server, _ = _build(service, caller_for, tools, page_size, name, session_subscriptions)
    return server


def create_stdio_server(service: ArtifactService, caller: Caller) -> tuple[Server[Any], HandshakeReads]:
    """The server ``blobstore mcp`` serves for ``caller``, and what answers its plain reads beside the SDK
    (pass both to :func:`~mcp_resources.transports.stdio.serve_on_stdio`)."""
    server, resources = _build(service, fixed_caller(caller), True, DEFAULT_PAGE_SIZE, SERVER_NAME, True)
    return server, HandshakeReads(server, resources, caller)


def _build(
    service: ArtifactService,
    caller_for: CallerResolver,
    tools: bool,
    page_size: int,
    name: str,
    session_subscriptions: bool,
) -> tuple[Server[Any], StoreResources]:
    check_sdk_shape()
    resources = StoreResources(service, caller_for, page_size=page_size)
    store_tools = StoreTools(resources) if tools else None
    server: Server[Any] = Server(
        name,
        version=__version__,
        title="Artifact store",
        instructions=INSTRUCTIONS,
        on_list_resources=resources.list_resources,
        on_list_resource_templates=resources.list_templates,
        on_read_resource=resources.read_resource,
        on_list_tools=store_tools.list_tools if store_tools else None,
        on_call_tool=store_tools.call_tool if store_tools else None,
        get_tool_input_schema=store_tools.input_schema if store_tools else None,
    )
    StoreNotifications(service, caller_for).install(server, session_subscriptions=session_subscriptions)
    if service.settings.mcp_files_capability == EXPERIMENTAL:
        FilesCapability(service, caller_for).install(server)
    install_request_metrics(server)
    return server, resources

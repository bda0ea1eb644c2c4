"""Serve the store's resources from another MCP server.

A host sends ``resources/read`` for a ``resource_link`` to the server that returned the link, so a tool server
that stores its products here must also answer for ``blobstore://`` URIs. :func:`embed_store` adds the store's
``resources/list``, ``resources/templates/list`` and ``resources/read`` (and optionally the upload/read tools)
to an existing low-level ``Server`` or ``MCPServer``, backed by the same disk or S3 store through an
:class:`~blobstore.service.ArtifactService`. Handlers the server already has keep working: the server's own
resources and tools are listed first, reads of other schemes go to its own handler.

This module is what a tool author imports: besides :func:`embed_store`, the file parameter type
(:class:`FileInput`), the tool-result helpers (:func:`resource_link_for`, :func:`tool_result_for`, the token
estimates) and :func:`first_view_uri` are named here, wherever in the package they live.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterable, AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict, Unpack

from mcp.server import MCPServer, Server, ServerRequestContext
from mcp.server.lowlevel.server import HandlerEntry
from mcp.server.subscriptions import SubscriptionBus
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INTERNAL_ERROR,
    CallToolRequestParams,
    CallToolResult,
    InputRequiredResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListToolsResult,
    PaginatedRequestParams,
    ReadResourceRequestParams,
    ReadResourceResult,
    ResourceLink,
    TextContent,
    Tool,
)

from blobstore.config import Settings
from blobstore.errors import BlobstoreError, InvalidRequest
from blobstore.links import Role
from blobstore.models import Artifact, Caller
from blobstore.service import ArtifactService
from blobstore.tokens import estimate_audio_tokens, estimate_image_tokens, estimate_text_tokens
from blobstore.validation import validate_metadata
from mcp_resources.errors import jsonrpc_code, to_mcp_error, tool_failure
from mcp_resources.reading.resources import DEFAULT_PAGE_SIZE, CallerResolver, StoreResources
from mcp_resources.reading.views import first_view_uri
from mcp_resources.results.content import resource_link_for, tool_result_for
from mcp_resources.results.renditions import RenditionCache
from mcp_resources.tools.binary_schema import advertise_handles, binary_sites
from mcp_resources.tools.file_params import OPENAI_FILE_PARAMS, FileCalls, FileInput
from mcp_resources.tools.handles import ArgumentHandles
from mcp_resources.tools.media_params import (
    Audio,
    Document,
    FactsNotRead,
    Image,
    MediaCalls,
    MediaLimits,
    Video,
    advertised,
    description_line,
)
from mcp_resources.tools.media_results import media_result, mentions_media, output_schema, return_annotation
from mcp_resources.tools.tools import StoreTools
from mcp_resources.transports.compose import HOST_CURSOR, STORE_CURSOR, after_the_hosts, as_result, by_scheme
from mcp_resources.transports.notifications import StoreNotifications
from mcp_resources.transports.sdk_internals import (
    check_sdk_shape,
    lowlevel_server,
    registered_tool,
    subscription_bus,
    tool_context,
)
from mcp_resources.transports.server import fixed_caller

__all__ = [
    "Audio",
    "Document",
    "EmbeddedStore",
    "FactsNotRead",
    "FileInput",
    "Image",
    "MediaLimits",
    "Video",
    "embed_store",
    "estimate_audio_tokens",
    "estimate_image_tokens",
    "estimate_text_tokens",
    "first_view_uri",
    "register_langchain_tools",
    "resource_link_for",
    "tool_result_for",
]
"""The names a tool server imports from here (the rest of the package may move; these stay)."""


class PutOptions(TypedDict, total=False):
    """What :meth:`EmbeddedStore.put` takes besides the bytes and the name; ``put_once`` hands it on."""

    mime_type: str | None
    ttl_seconds: int | None
    metadata: dict[str, Any] | None
    caller: Caller | None


@dataclass
class EmbeddedStore:
    """What a tool server keeps after embedding: store products and build tool results for them."""

    service: ArtifactService
    caller: CallerResolver
    default_caller: Caller | None
    resources: StoreResources
    tools: StoreTools | None
    renditions: RenditionCache = field(default_factory=RenditionCache)

    def _who(self, caller: Caller | None) -> Caller:
        chosen = caller or self.default_caller
        if chosen is None:
            raise ValueError("pass caller=: this store was embedded with a per-request caller resolver")
        return chosen

    async def put(
        self,
        data: bytes | AsyncIterable[bytes],
        *,
        name: str,
        mime_type: str | None = None,
        ttl_seconds: int | None = None,
        metadata: dict[str, Any] | None = None,
        caller: Caller | None = None,
    ) -> Artifact:
        """Store bytes (or a stream) as a new artifact."""

        async def one(chunk: bytes) -> AsyncIterator[bytes]:
            yield chunk

        stream = one(data) if isinstance(data, bytes) else data
        return await self.service.create_artifact(
            self._who(caller),
            stream,
            name=name,
            mime_type=mime_type,
            ttl_seconds=ttl_seconds,
            metadata=metadata,
            expected_size=len(data) if isinstance(data, bytes) else None,
        )

    async def put_once(self, data: bytes, *, name: str, **options: Unpack[PutOptions]) -> Artifact:
        """Store bytes unless the caller already has a live artifact with the same bytes, name and metadata.

        Content is addressed by its SHA-256 either way (a new artifact over existing bytes shares their
        blob). When such an artifact exists it is returned, with its expiry moved to ``ttl_seconds`` (the
        default TTL) from now if that is later than its current one, so storing existing content again
        extends its lifetime and keeps its URI. Pinned artifacts stay pinned.
        """
        who = self._who(options.get("caller"))
        service = self.service
        found = await service.live_twin(
            who,
            sha256=hashlib.sha256(data).hexdigest(),
            size=len(data),
            name=name,
            metadata=validate_metadata(options.get("metadata")),
            expires_at=service.expiry_for(options.get("ttl_seconds"), service.clock()),
        )
        if found is not None:
            return found
        options["caller"] = who
        return await self.put(data, name=name, **options)

    async def tool_result_for(
        self,
        artifact: Artifact,
        *,
        summary: str | None = None,
        caller: Caller | None = None,
        inline_limit: int | None = None,
        long_edge: int | None = None,
        audience: list[Role] | None = None,
    ) -> CallToolResult:
        return await tool_result_for(
            artifact,
            summary=summary,
            service=self.service,
            caller=self._who(caller),
            inline_limit=inline_limit,
            long_edge=long_edge,
            renditions=self.renditions,
            audience=audience,
        )

    def resource_link_for(self, artifact: Artifact, **options: Any) -> ResourceLink:
        return resource_link_for(artifact, max_window=self.resources.max_window, **options)


def register_langchain_tools(
    mcp: MCPServer, tools: Sequence[Any], *, name_prefix: str | None = None
) -> list[str]:
    """Serve LangChain tools (``@tool`` functions, ``BaseTool`` objects, plain functions) as tools of ``mcp``,
    with their typed media arguments and results (:mod:`mcp_resources.tools.langchain_bridge`); the names
    registered. Needs the extra ``mcp-blobstore[langchain]`` (``langchain-core``)."""
    try:
        from mcp_resources.tools.langchain_bridge import register_langchain_tools as register
    except ModuleNotFoundError as exc:
        if exc.name is None or not exc.name.startswith("langchain_core"):
            raise
        raise ModuleNotFoundError(
            "register_langchain_tools needs langchain-core: pip install 'mcp-blobstore[langchain]'",
            name=exc.name,
        ) from exc
    return register(mcp, tools, name_prefix=name_prefix)


def _lowlevel(server: Server[Any] | MCPServer) -> Server[Any]:
    return lowlevel_server(server) if isinstance(server, MCPServer) else server


def _split(params: PaginatedRequestParams | None) -> tuple[str, str | None]:
    """Which part a composite cursor points into, and the part's own cursor."""
    cursor = params.cursor if params is not None else None
    if cursor is None:
        return HOST_CURSOR, None
    if cursor.startswith(HOST_CURSOR):
        return HOST_CURSOR, cursor[len(HOST_CURSOR) :]
    if cursor.startswith(STORE_CURSOR):
        return STORE_CURSOR, cursor[len(STORE_CURSOR) :] or None
    raise to_mcp_error(InvalidRequest("invalid cursor"))


def _with_cursor(params: PaginatedRequestParams | None, cursor: str | None) -> PaginatedRequestParams:
    base = params or PaginatedRequestParams()
    return base.model_copy(update={"cursor": cursor})


def embed_store(
    server: Server[Any] | MCPServer,
    service: ArtifactService,
    *,
    caller: Caller | CallerResolver,
    tools: bool = False,
    page_size: int = DEFAULT_PAGE_SIZE,
    notifications: bool = True,
    subscriptions: SubscriptionBus | None = None,
) -> EmbeddedStore:
    """Register the store's resource handlers (and, with ``tools=True``, the upload/read tools) on ``server``.

    ``caller`` is the principal the tool server stores and reads as (a fixed :class:`Caller`), or a resolver
    from the request context when the host authenticates callers itself. With ``notifications``, the host's
    clients hear ``resources/updated`` and ``list_changed`` for the store's artifacts in both protocol eras
    (see :mod:`mcp_resources.transports.notifications`); an ``MCPServer``'s own listen events keep flowing:
    pass the bus it was given as ``MCPServer(subscriptions=...)`` as ``subscriptions`` (without it, the bus
    the ``MCPServer`` made itself is used). A low-level server that already serves ``subscriptions/listen``
    keeps its handler unless its bus is passed (store changes then reach only handshake-era sessions).
    """
    check_sdk_shape()
    resolver = fixed_caller(caller) if isinstance(caller, Caller) else caller
    resources = StoreResources(service, resolver, page_size=page_size)
    store_tools = StoreTools(resources) if tools else None
    low = _lowlevel(server)
    _compose_resources(low, resources)
    if store_tools is not None:
        _compose_tools(low, store_tools)
    renditions = RenditionCache()
    host = server if isinstance(server, MCPServer) else None
    _compose_file_params(low, service, resolver, host, renditions)
    if notifications:
        serves_listen = low.get_request_handler("subscriptions/listen") is not None
        # The host's own events (tool and prompt changes) are forwarded from its bus to the listen streams.
        host_bus = subscriptions
        if host_bus is None and isinstance(server, MCPServer):
            host_bus = subscription_bus(server)
        StoreNotifications(service, resolver, host_bus=host_bus).install(
            low, listen=serves_listen if host_bus is not None else not serves_listen
        )
    return EmbeddedStore(
        service=service,
        caller=resolver,
        default_caller=caller if isinstance(caller, Caller) else None,
        resources=resources,
        tools=store_tools,
        renditions=renditions,
    )


def _compose_resources(low: Server[Any], resources: StoreResources) -> None:
    prev_list = low.get_request_handler("resources/list")
    prev_templates = low.get_request_handler("resources/templates/list")
    prev_read = low.get_request_handler("resources/read")

    async def list_resources(
        ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        part, cursor = (
            _split(params) if prev_list is not None else (STORE_CURSOR, params.cursor if params else None)
        )
        if prev_list is None:
            return await resources.list_resources(ctx, _with_cursor(params, cursor))
        if part == HOST_CURSOR:
            theirs = as_result(
                ListResourcesResult, await prev_list.handler(ctx, _with_cursor(params, cursor))
            )
            if theirs.next_cursor is not None:
                return theirs.model_copy(update={"next_cursor": HOST_CURSOR + theirs.next_cursor})
            ours = await resources.list_resources(ctx, _with_cursor(params, None))
            merged = list(theirs.resources) + list(ours.resources)
        else:
            ours = await resources.list_resources(ctx, _with_cursor(params, cursor))
            merged = list(ours.resources)
        following = STORE_CURSOR + ours.next_cursor if ours.next_cursor is not None else None
        return ListResourcesResult(resources=merged, next_cursor=following, ttl_ms=0, cache_scope="private")

    low.add_request_handler("resources/list", PaginatedRequestParams, list_resources)
    templates = after_the_hosts(
        resources.list_templates,
        prev_templates,
        ListResourceTemplatesResult,
        "resource_templates",
        resources.templates,
    )
    low.add_request_handler("resources/templates/list", PaginatedRequestParams, templates)
    read = by_scheme(resources.read_resource, prev_read, ReadResourceResult)
    low.add_request_handler("resources/read", ReadResourceRequestParams, read)


def _compose_tools(low: Server[Any], store_tools: StoreTools) -> None:
    prev_list: HandlerEntry[Any] | None = low.get_request_handler("tools/list")
    prev_call: HandlerEntry[Any] | None = low.get_request_handler("tools/call")
    prev_schema = low.get_tool_input_schema

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams) -> Any:
        if store_tools.handles(params.name) or prev_call is None:
            return await store_tools.call_tool(ctx, params)
        return await prev_call.handler(ctx, params)

    def input_schema(name: str) -> Any:
        if store_tools.handles(name):
            return store_tools.input_schema(name)
        return prev_schema(name) if prev_schema is not None else None

    list_tools = after_the_hosts(
        store_tools.list_tools, prev_list, ListToolsResult, "tools", lambda: store_tools.tools
    )
    low.add_request_handler("tools/list", PaginatedRequestParams, list_tools)
    low.add_request_handler("tools/call", CallToolRequestParams, call_tool)
    low.get_tool_input_schema = input_schema


def _with_file_params(tool: Tool, settings: Settings, returns: Any = None) -> Tool:
    """``tool`` as the model should see it: handles admitted where it takes bytes, file parameters named,
    typed media parameters with the limits in force and a line saying what they take, and a typed media
    result's ``outputSchema``."""
    update: dict[str, Any] = {}
    if returns is not None:
        update["output_schema"] = output_schema(returns)
    sites = binary_sites(tool.input_schema)
    if sites:
        schema = advertise_handles(tool.input_schema)
        update["input_schema"] = advertised(schema or {}, settings) or schema
        names = FileCalls.file_params(sites)
        if names:
            update["meta"] = {**(tool.meta or {}), OPENAI_FILE_PARAMS: names}
        line = description_line(tool.input_schema, settings)
        if line is not None:
            update["description"] = f"{(tool.description or '').rstrip()}\n\n{line}".lstrip()
    return tool.model_copy(update=update) if update else tool


def _compose_file_params(
    low: Server[Any],
    service: ArtifactService,
    resolver: CallerResolver,
    server: MCPServer | None,
    renditions: RenditionCache,
) -> None:
    """The server's own tools take artifact URIs where they take bytes, file parameters in every form
    (:mod:`mcp_resources.tools.file_params`), resolved as the caller before the tool runs, and typed media
    checked before it runs (:mod:`mcp_resources.tools.media_params`); an ``MCPServer`` tool's typed media
    results are stored and answered by the store's rules (:mod:`mcp_resources.tools.media_results`)."""
    prev_list: HandlerEntry[Any] | None = low.get_request_handler("tools/list")
    prev_call: HandlerEntry[Any] | None = low.get_request_handler("tools/call")
    if prev_list is None or prev_call is None:
        return
    handles = ArgumentHandles(service)
    files = FileCalls(service, handles)
    media = MediaCalls(service)

    def media_return(name: str) -> Any:
        """The return annotation of an ``MCPServer`` tool that returns typed media, else None."""
        tool = registered_tool(server, name) if server is not None else None
        annotation = return_annotation(tool.fn) if tool is not None else None
        return annotation if annotation is not None and mentions_media(annotation) else None

    async def list_tools(ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None) -> Any:
        page = as_result(ListToolsResult, await prev_list.handler(ctx, params))
        listed = [_with_file_params(tool, service.settings, media_return(tool.name)) for tool in page.tools]
        return page.model_copy(update={"tools": listed})

    async def run(ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams, caller: Caller) -> Any:
        returns = media_return(params.name)
        if returns is None or server is None:
            return await prev_call.handler(ctx, params)
        tool = registered_tool(server, params.name)
        assert tool is not None
        try:
            value = await tool.run(
                params.arguments or {}, tool_context(server, ctx, params), convert_result=False
            )
        except MCPError:
            raise
        except Exception as exc:
            # As the SDK answers a tool that fails: its ToolError's text (a crash's says only which tool).
            return CallToolResult(content=[TextContent(text=str(exc))], is_error=True)
        if isinstance(value, CallToolResult | InputRequiredResult):
            return value
        return await media_result(
            value, returns, tool=params.name, service=service, caller=caller, renditions=renditions
        )

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams) -> Any:
        lookup = low.get_tool_input_schema
        schema = lookup(params.name) if lookup is not None else None
        sites = binary_sites(schema)
        if not sites and media_return(params.name) is None:
            return await prev_call.handler(ctx, params)
        try:
            caller = resolver(ctx)
            inlined = [site for site in sites if not site.file_param]
            arguments = await handles.resolve(
                caller, tool=params.name, arguments=params.arguments, sites=inlined
            )
            specs = media.specs(schema)
            caps = {path: spec.max_bytes for path, spec in specs.items()}
            async with files.call(caller, params.name, arguments, sites, caps) as found:
                await media.check(found, arguments, specs)
                result = await run(ctx, params.model_copy(update={"arguments": arguments}), caller)
            if found.refusal is not None:
                return tool_failure(found.refusal)
            return result
        except BlobstoreError as exc:
            if jsonrpc_code(exc.code) == INTERNAL_ERROR:
                raise to_mcp_error(exc) from None
            return tool_failure(exc)

    low.add_request_handler("tools/list", PaginatedRequestParams, list_tools)
    low.add_request_handler("tools/call", CallToolRequestParams, call_tool)

"""Upload and read tools for clients that only speak MCP.

``upload_begin`` → ``upload_chunk`` (base64, at most ``mcp_chunk_max`` raw bytes, by index, any order,
idempotent) → ``upload_status`` → ``upload_commit`` (progress notifications while hashing and storing; returns
text plus a
``resource_link``) or ``upload_abort``. The ``upload_id`` is an explicit, server-minted handle (the 2026-07-28
"stateful tools" pattern): it is checked against the caller's namespace on every call and expires.
``read_artifact`` returns a window as content blocks, for hosts that never call ``resources/read``.

Failures the model can act on (bad arguments, missing chunks, expired uploads, unknown artifacts) are tool
execution errors (``isError`` with ``structuredContent.error.code``), not protocol errors, so the model sees
them. Failures of the server itself (``storage_full``, ``storage_unavailable``, ``corruption``, ``internal``)
are ``-32603`` JSON-RPC errors with ``data.reason``, as everywhere else on the MCP edge.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final

from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
    ToolAnnotations,
)
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from blobstore.auth import require_scope
from blobstore.config import Settings
from blobstore.errors import BlobstoreError, InvalidRequest, LimitExceeded, UnsupportedMedia
from blobstore.links import describe
from blobstore.models import Caller, Scope, UploadSession
from blobstore.views.engine import views_for
from blobstore.views.text_views import modality_of
from mcp_resources.errors import jsonrpc_code, mcp_handler, tool_failure
from mcp_resources.reading.progress import view_progress
from mcp_resources.reading.resources import CallerResolver, StoreResources
from mcp_resources.reading.text_answers import text_answer
from mcp_resources.reading.views import (
    asks_for_a_view,
    view_arguments,
    view_fields,
    view_result,
    views_phrase,
)
from mcp_resources.results.content import read_with_tool, resource_link_for
from mcp_resources.uris import WINDOW_META_KEY, parse_store_uri, window_uri

TOOLS_TTL_MS: Final = 3600 * 1000
TOOL_SCOPES: Final[dict[str, Scope]] = {
    "upload_begin": Scope.WRITE,
    "upload_chunk": Scope.WRITE,
    "upload_status": Scope.WRITE,
    "upload_commit": Scope.WRITE,
    "upload_abort": Scope.WRITE,
    "read_artifact": Scope.READ,
}
# The tools that send notifications while they run (``notifications/progress`` when the call carries a
# progress token): hashing and storing an upload, computing a view (read_artifact with view arguments). Over
# streamable HTTP only their calls need an event-stream response; others are JSON.
PROGRESS_TOOLS: Final = frozenset({"upload_commit", "read_artifact"})
EVENT_BUDGET: Final = 760 * 1024
"""A view answer's budget when its call asks for progress over HTTP: it is then one server-sent event, and
the official clients cap one event at 1 MiB (these bytes as base64 in their JSON fit it); past it, blocks
are resource links as past any answer's budget."""


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class UploadBeginArgs(_Args):
    name: str = Field(description="File name, e.g. report.pdf (1-1024 printable characters).")
    mime_type: str | None = Field(default=None, description="MIME type; sniffed from the bytes when omitted.")
    size: int | None = Field(default=None, ge=0, description="Total size in bytes, if known.")
    sha256: str | None = Field(
        default=None, description="Expected SHA-256 (hex) of the whole file, if known."
    )
    chunk_size: int | None = Field(
        default=None, gt=0, description="Bytes per chunk; default and maximum: max_chunk."
    )
    ttl_seconds: int | None = Field(default=None, gt=0, description="How long the artifact is kept.")
    metadata: dict[str, Any] | None = Field(
        default=None, description="Small JSON object stored with the artifact."
    )


class UploadChunkArgs(_Args):
    upload_id: str
    index: int = Field(
        ge=0, description="Chunk number: chunk i covers bytes [i*chunk_size, (i+1)*chunk_size)."
    )
    data: str = Field(description="The chunk's bytes, base64 (standard alphabet, padded).")
    sha256: str | None = Field(
        default=None, description="SHA-256 (hex) of this chunk's bytes, checked if given."
    )


class UploadIdArgs(_Args):
    upload_id: str


class UploadCommitArgs(_Args):
    upload_id: str
    sha256: str | None = Field(default=None, description="Expected SHA-256 (hex) of the whole file.")


# read_artifact's byte-window arguments; each server's model adds the view arguments of every view kind
# (read_artifact_model). A comment, not a docstring: the schema would carry a docstring as its description.
class ReadArtifactArgs(_Args):
    uri: str = Field(description="blobstore://artifacts/{id}, optionally with ?offset=&length=.")
    offset: int | None = Field(
        default=None, ge=0, description="First byte of the window (overrides the URI's)."
    )
    length: int | None = Field(default=None, gt=0, description="Window length (overrides the URI's).")
    include_media: bool | None = Field(
        default=None,
        description="false: text alone. An image or a recording read without view arguments comes as its "
        "text (OCR text, transcript) with a link to the original; with view arguments, pages come as their "
        "text (or OCR text), a video's frames as its scene list, a region as its OCR text. Default: as "
        "text only where the host's model cannot take the media.",
    )


def read_artifact_model(settings: Settings) -> type[ReadArtifactArgs]:
    """``read_artifact``'s arguments on a server with ``settings``: the window's, then the views' (their
    descriptions state the limits this server enforces: a model reads the number, not a setting's name)."""
    fields: dict[str, Any] = view_fields(settings)
    return create_model("ReadArtifactArgs", __base__=ReadArtifactArgs, **fields)


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    return schema


def _text(value: dict[str, Any]) -> TextContent:
    return TextContent(text=json.dumps(value, separators=(",", ":"), sort_keys=True))


def _session_facts(session: UploadSession) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "upload_id": session.id,
        "state": session.state.value,
        "chunk_size": session.chunk_size,
        "expires_at": session.expires_at.isoformat(),
    }
    if session.declared_size is not None:
        facts["size"] = session.declared_size
        facts["chunk_count"] = -(-session.declared_size // session.chunk_size) if session.declared_size else 0
    return facts


def window_summary(uri: str, window: dict[str, Any]) -> str:
    """The line before a window ``read_artifact`` answers: which bytes it holds and the call for the next."""
    offset = window.get("offset", 0)
    line = f"{uri}: bytes {offset}-{offset + window.get('length', 0)} of {window.get('size')}"
    following = parse_store_uri(str(window.get("next") or ""))
    if window.get("eof") or following is None:
        return line + " (end of artifact)."
    return (
        f"{line}.\nNext: read_artifact(uri, offset={following.offset}, length={following.length}), or "
        f"resources/read {window['next']}."
    )


async def _one(data: bytes) -> AsyncIterator[bytes]:
    yield data


HostTakes = Callable[[str], bool]
"""Whether the host's model takes a modality (``image``, ``audio``)."""


def _takes_all(modality: str) -> bool:
    return True


def _answers_as_an_event(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether the call's answer is one server-sent event: it came over HTTP (the only transport with a
    request object) and carries a progress token (``http.needs_event_stream``)."""
    meta: Any = ctx.meta or {}
    return ctx.request is not None and meta.get("progressToken", meta.get("progress_token")) is not None


class StoreTools:
    def __init__(self, resources: StoreResources, *, host_takes: HostTakes = _takes_all) -> None:
        self.host_takes = host_takes
        """What the host's model takes: the proxy's host profile knows; a store alone assumes all."""
        self.resources = resources
        self.service = resources.service
        self.caller_for: CallerResolver = resources.caller_for
        settings = self.service.settings
        self.max_chunk = settings.mcp_chunk_max
        self._handlers: dict[
            str,
            tuple[
                type[BaseModel],
                Callable[[ServerRequestContext[Any, Any], Caller, Any], Awaitable[CallToolResult]],
            ],
        ] = {
            "upload_begin": (UploadBeginArgs, self.upload_begin),
            "upload_chunk": (UploadChunkArgs, self.upload_chunk),
            "upload_status": (UploadIdArgs, self.upload_status),
            "upload_commit": (UploadCommitArgs, self.upload_commit),
            "upload_abort": (UploadIdArgs, self.upload_abort),
            "read_artifact": (read_artifact_model(settings), self.read_artifact),
        }
        self._tools = self._describe()

    def _describe(self) -> list[Tool]:
        chunk = self.max_chunk
        window = self.resources.max_window
        writes = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
        docs = {
            "upload_begin": (
                "Start a chunked upload of a file into the artifact store. Returns upload_id, chunk_size and "
                f"max_chunk ({chunk} bytes). Then send the bytes with upload_chunk and finish with "
                "upload_commit.",
                ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False),
            ),
            "upload_chunk": (
                f"Send chunk number `index` (base64, at most {chunk} raw bytes; every chunk but the last "
                "exactly "
                "chunk_size bytes). Chunks may come in any order; resending a chunk with the same bytes is a "
                "success, with different bytes an error.",
                ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True),
            ),
            "upload_status": (
                "Show an upload's state, the bytes received and the chunk indexes still missing.",
                ToolAnnotations(read_only_hint=True),
            ),
            "upload_commit": (
                "Finish an upload: verify size and SHA-256, store the artifact and return a resource_link "
                "(blobstore://artifacts/{id}). Sends progress notifications while hashing and storing.",
                writes,
            ),
            "upload_abort": (
                "Abandon an upload and free its chunks.",
                ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True),
            ),
            "read_artifact": (
                "Read an artifact (or a byte window of it) as content blocks, for hosts that cannot read "
                "resources. "
                f"Windows are at most {window} bytes; the result says where the next window starts. "
                f"Media are better read as views: {views_phrase()}. A view's first text block says what it "
                "holds, its last how to read the next piece.",
                ToolAnnotations(read_only_hint=True, idempotent_hint=True),
            ),
        }
        return [
            Tool(
                name=name,
                description=docs[name][0],
                input_schema=_schema(model),
                annotations=docs[name][1],
            )
            for name, (model, _handler) in self._handlers.items()
        ]

    # -- protocol handlers ------------------------------------------------------------------------------

    @property
    def tools(self) -> list[Tool]:
        return list(self._tools)

    def handles(self, name: str) -> bool:
        return name in self._handlers

    def input_schema(self, name: str) -> dict[str, Any] | None:
        for tool in self._tools:
            if tool.name == name:
                return tool.input_schema
        return None

    @mcp_handler
    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        if params is not None and params.cursor is not None:
            raise InvalidRequest("invalid cursor")
        return ListToolsResult(tools=self.tools, ttl_ms=TOOLS_TTL_MS, cache_scope="public")

    @mcp_handler
    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
    ) -> CallToolResult:
        entry = self._handlers.get(params.name)
        if entry is None:
            raise MCPError(INVALID_PARAMS, f"Unknown tool: {params.name}", data={"reason": "unknown_tool"})
        model, handler = entry
        try:
            args = model.model_validate(params.arguments or {})
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors()
            )
            return self._failure(InvalidRequest(f"invalid arguments: {problems}"))
        try:
            caller = require_scope(self.caller_for(ctx), TOOL_SCOPES[params.name])
            with view_progress(ctx):
                return await handler(ctx, caller, args)
        except BlobstoreError as exc:
            # Failures the model can act on are the tool's result; the server's own are protocol errors.
            if jsonrpc_code(exc.code) == INTERNAL_ERROR:
                raise
            return self._failure(exc)

    @staticmethod
    def _failure(exc: BlobstoreError, **extra: Any) -> CallToolResult:
        return tool_failure(exc, **extra)

    # -- uploads ----------------------------------------------------------------------------------------

    async def upload_begin(
        self, ctx: ServerRequestContext[Any, Any], caller: Caller, args: UploadBeginArgs
    ) -> CallToolResult:
        if args.chunk_size is not None and args.chunk_size > self.max_chunk:
            raise InvalidRequest(f"chunk_size must be at most {self.max_chunk} bytes over MCP")
        session = await self.service.uploads.begin(
            caller,
            name=args.name,
            mime_type=args.mime_type,
            size=args.size,
            sha256=args.sha256,
            chunk_size=args.chunk_size or self.max_chunk,
            ttl_seconds=args.ttl_seconds,
            metadata=args.metadata,
            protocol="mcp",
        )
        facts = {**_session_facts(session), "max_chunk": self.max_chunk}
        return CallToolResult(content=[_text(facts)], structured_content=facts)

    def _decode_chunk(self, data: str) -> bytes:
        # Refuse before decoding, so an oversized argument never doubles in memory.
        if len(data) > 4 * -(-self.max_chunk // 3):
            raise LimitExceeded(
                f"a chunk sent over MCP may carry at most {self.max_chunk} bytes", max_chunk=self.max_chunk
            )
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidRequest("data is not valid base64") from None
        if len(raw) > self.max_chunk:
            raise LimitExceeded(
                f"a chunk sent over MCP may carry at most {self.max_chunk} bytes", max_chunk=self.max_chunk
            )
        return raw

    async def upload_chunk(
        self, ctx: ServerRequestContext[Any, Any], caller: Caller, args: UploadChunkArgs
    ) -> CallToolResult:
        raw = self._decode_chunk(args.data)
        record = await self.service.uploads.put_chunk(
            caller, args.upload_id, args.index, _one(raw), sha256=args.sha256
        )
        facts = {
            "upload_id": args.upload_id,
            "index": record.index,
            "size": record.size,
            "sha256": record.sha256,
        }
        return CallToolResult(content=[_text(facts)], structured_content=facts)

    async def upload_status(
        self, ctx: ServerRequestContext[Any, Any], caller: Caller, args: UploadIdArgs
    ) -> CallToolResult:
        status = await self.service.uploads.status(caller, args.upload_id)
        facts = _session_facts(status.session)
        facts["received_bytes"] = status.received_bytes
        facts["received_chunks"] = len(status.chunks)
        if status.missing is not None:
            facts["missing"] = status.missing[:100]
            facts["missing_count"] = len(status.missing)
        if status.session.artifact_id is not None:
            facts["artifact_id"] = status.session.artifact_id
        return CallToolResult(content=[_text(facts)], structured_content=facts)

    async def upload_commit(
        self, ctx: ServerRequestContext[Any, Any], caller: Caller, args: UploadCommitArgs
    ) -> CallToolResult:
        status = await self.service.uploads.status(caller, args.upload_id)
        total = float(status.session.declared_size or status.received_bytes or 0)
        sent = -1.0

        async def progress(done: int) -> None:
            nonlocal sent
            # Progress must increase; at most about a hundred notifications however large the file.
            if done > sent and (done >= total or done - sent >= max(total / 100, 1)):
                sent = float(done)
                await ctx.session.report_progress(float(done), total or None, "hashing and storing")

        artifact = await self.service.uploads.complete(
            caller, args.upload_id, sha256=args.sha256, progress=progress
        )
        link = resource_link_for(artifact, max_window=self.resources.max_window)
        facts = {
            "artifact_id": artifact.id,
            "uri": artifact.uri,
            "name": artifact.name,
            "mime_type": artifact.mime_type,
            "size": artifact.size,
            "sha256": artifact.sha256,
        }
        read = read_with_tool(
            artifact,
            tool="read_artifact",
            max_window=self.resources.max_window,
            max_audio_seconds=self.service.settings.view_max_audio_seconds,
        )
        # Name, type and size on the line too: clients that turn the link into a bare file block (LangChain's
        # adapters) drop them from the link.
        text = TextContent(
            text=f"Stored {describe(artifact)} as {artifact.uri}; {read}; sha256 {artifact.sha256}."
        )
        return CallToolResult(content=[text, link], structured_content=facts)

    async def upload_abort(
        self, ctx: ServerRequestContext[Any, Any], caller: Caller, args: UploadIdArgs
    ) -> CallToolResult:
        await self.service.uploads.abort(caller, args.upload_id)
        facts = {"upload_id": args.upload_id, "state": "aborted"}
        return CallToolResult(content=[_text(facts)], structured_content=facts)

    # -- reading ----------------------------------------------------------------------------------------

    async def read_artifact(
        self, ctx: ServerRequestContext[Any, Any], caller: Caller, args: ReadArtifactArgs
    ) -> CallToolResult:
        view = {argument.name: getattr(args, argument.name) for argument in view_arguments()}
        if asks_for_a_view(view):
            return await self._read_view(caller, args, view, streamed=_answers_as_an_event(ctx))
        ref = parse_store_uri(args.uri)
        if ref is not None and not ref.has_window and args.offset is None and args.length is None:
            text = await self._as_text(caller, ref.artifact_id, args.include_media)
            if text is not None:
                return text
        uri = args.uri
        if ref is not None and (args.offset is not None or args.length is not None):
            offset = args.offset if args.offset is not None else (ref.offset or 0)
            length = args.length if args.length is not None else (ref.length or self.resources.max_window)
            uri = window_uri(ref.artifact_id, offset, length)
        try:
            result = await self.resources.read(caller, uri)
        except MCPError as exc:
            data = dict(exc.data) if isinstance(exc.data, dict) else {}
            code = data.pop("reason", "internal")
            if exc.code != INVALID_PARAMS:
                raise
            return CallToolResult(
                content=[TextContent(text=f"Error ({code}): {exc.message}")],
                structured_content={"error": {"code": code, "message": exc.message, **data}},
                is_error=True,
            )
        contents = result.contents[0]
        window = (contents.meta or {}).get(WINDOW_META_KEY, {})
        summary = TextContent(text=window_summary(uri, window))
        blocks: list[ContentBlock] = [summary, EmbeddedResource(resource=contents)]
        return CallToolResult(content=blocks, structured_content={"window": window})

    async def _as_text(
        self, caller: Caller, artifact_id: str, include_media: bool | None
    ) -> CallToolResult | None:
        """The artifact's text view when ``include_media=false`` asks for text, or when the host's model
        cannot take the artifact's modality; None otherwise (and for an artifact without one)."""
        if include_media is True or (include_media is None and self.host_takes is _takes_all):
            return None  # no lookup on the plain read's path
        views = views_for(self.service)
        if include_media is None:
            artifact = await self.service.get_artifact(caller, artifact_id)
            modality = modality_of(artifact.mime_type)
            if modality is None or self.host_takes(modality):
                return None
            why = f"the host's model takes no {modality}"
        else:
            why = "include_media=false asks for text"
        return await text_answer(views, caller, artifact_id, why=why, max_window=self.resources.max_window)

    async def _read_view(
        self, caller: Caller, args: ReadArtifactArgs, view: dict[str, Any], *, streamed: bool = False
    ) -> CallToolResult:
        ref = parse_store_uri(args.uri)
        if ref is None or ref.has_window:
            raise InvalidRequest("a view is read from an artifact URI: blobstore://artifacts/{id}")
        if args.offset is not None or args.length is not None:
            raise InvalidRequest("offset and length read bytes; a view takes none of them")
        settings = self.service.settings
        budget = max(settings.inline_limit, settings.mcp_window_max)
        result = await view_result(
            views_for(self.service),
            caller,
            ref.artifact_id,
            view,
            budget=min(budget, EVENT_BUDGET) if streamed else budget,
            include_media=args.include_media,
        )
        if result is None:  # a view with no text of its own, asked for in text: its source's text view
            result = await self._as_text(caller, ref.artifact_id, False)
        if result is None:
            raise UnsupportedMedia(
                "include_media=false asks for text, and this server has no text standing for this view: "
                "read it with include_media=true"
            )
        return result

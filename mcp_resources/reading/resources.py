"""The store as MCP resources: ``resources/list``, ``resources/templates/list`` and ``resources/read``.

Transport-free: :class:`StoreResources` answers for a :class:`~blobstore.models.Caller` resolved from the
request context, so the standalone server, the HTTP mount and servers that embed the store share one
implementation.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Protocol

from mcp.server import ServerRequestContext
from mcp.types import (
    Annotations,
    BlobResourceContents,
    ListResourcesResult,
    ListResourceTemplatesResult,
    PaginatedRequestParams,
    ReadResourceRequestParams,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    TextResourceContents,
)

from blobstore.auth import require_scope
from blobstore.errors import InvalidRequest, NotFound, RangeRequired
from blobstore.links import describe, iso_utc, title_of
from blobstore.models import Artifact, Caller, Scope
from blobstore.ranges import Window
from blobstore.service import ArtifactService
from blobstore.views.engine import views_for
from mcp_resources.errors import mcp_handler
from mcp_resources.reading.progress import view_progress
from mcp_resources.reading.views import ViewRef, parse_view_uri, read_view_uri, view_templates
from mcp_resources.results.wire_blobs import base64_text
from mcp_resources.uris import (
    ARTIFACT_META_KEY,
    META_PREFIX,
    WINDOW_META_KEY,
    WINDOW_URI_TEMPLATE,
    ArtifactRef,
    parse_store_uri,
    window_uri,
)

CallerResolver = Callable[[ServerRequestContext[Any, Any]], Caller]
"""Who is asking, from the request context (HTTP request, or nothing on stdio and in memory)."""

DEFAULT_PAGE_SIZE: Final = 100
VIEW_META_KEY: Final = f"{META_PREFIX}/view"
IMMUTABLE_TTL_MS: Final = 365 * 24 * 3600 * 1000
"""An artifact's bytes never change, so a read stays fresh until the artifact expires (at most a year)."""
TEMPLATES_TTL_MS: Final = 24 * 3600 * 1000

_TEXT_TYPES: Final = frozenset(
    {
        "application/json",
        "application/xml",
        "application/javascript",
        "application/x-ndjson",
        "application/yaml",
        "application/x-yaml",
        "application/toml",
        "application/sql",
        "image/svg+xml",
    }
)


def is_textual(mime_type: str) -> bool:
    return mime_type.startswith("text/") or mime_type in _TEXT_TYPES or mime_type.endswith(("+json", "+xml"))


def as_text(mime_type: str, data: bytes) -> str | None:
    """The bytes as text when the type is textual and they are valid UTF-8; otherwise None (send a blob)."""
    if not is_textual(mime_type):
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def window_description(inline_limit: int, max_window: int, *, first_window: bool = False) -> str:
    larger = (
        ["a larger one comes as its first window, with the next window's URI in _meta."]
        if first_window
        else [
            "a larger one fails with error -32602,",
            "data.reason 'range_required', data.size and data.first (the URI of the first window).",
        ]
    )
    return " ".join(
        [
            "A byte window of a stored artifact.",
            "Without offset/length, resources/read returns the whole artifact only if it is at most",
            f"{inline_limit} bytes (UTF-8 text as text, anything else a base64 blob);",
            *larger,
            "With offset/length it returns bytes [offset, min(offset+length, size)) as a blob;",
            f"length is clamped to {max_window} bytes and defaults to that maximum.",
            "offset == size returns an empty blob with eof; offset > size is 'range_not_satisfiable';",
            "non-numeric or negative values and length 0 are 'invalid_range'.",
            f"The result's _meta['{WINDOW_META_KEY}'] gives offset, length, size, eof, sha256 (of the whole",
            "artifact) and next (the URI of the following window, null at the end).",
            "Artifacts are immutable: the same window always returns the same bytes.",
        ]
    )


class NamesUri(Protocol):
    """Request params naming a resource (what :func:`~mcp_resources.errors.mcp_handler` reads ``uri`` of)."""

    @property
    def uri(self) -> str: ...


@dataclass(frozen=True, slots=True)
class ReadContents:
    """What a ``resources/read`` of a store URI found: one text or blob item and how long it stays fresh."""

    uri: str
    mime_type: str
    meta: dict[str, Any]
    text: str | None
    blob: str | None
    """Base64 of the bytes when they are not sent as text."""
    ttl_ms: int

    def result(self) -> ReadResourceResult:
        contents: TextResourceContents | BlobResourceContents
        if self.text is not None:
            contents = TextResourceContents(
                uri=self.uri, mime_type=self.mime_type, text=self.text, _meta=self.meta
            )
        else:
            assert self.blob is not None
            contents = BlobResourceContents(
                uri=self.uri, mime_type=self.mime_type, blob=self.blob, _meta=self.meta
            )
        return ReadResourceResult(contents=[contents], ttl_ms=self.ttl_ms, cache_scope="private")

    def handshake_wire(self) -> dict[str, Any]:
        """:meth:`result` as the SDK puts it on a handshake-era wire (2024-11-05 to 2025-11-25): the
        2025-11-25 schema's fields only (no ``ttlMs`` or ``cacheScope``), in its order, ``None`` fields left
        out. A test compares the line with the SDK's for every handshake version."""
        item: dict[str, Any]
        if self.text is not None:
            item = {"_meta": self.meta, "mimeType": self.mime_type, "text": self.text, "uri": self.uri}
        else:
            item = {"_meta": self.meta, "blob": self.blob, "mimeType": self.mime_type, "uri": self.uri}
        return {"contents": [item]}


class StoreResources:
    def __init__(
        self,
        service: ArtifactService,
        caller_for: CallerResolver,
        *,
        page_size: int = DEFAULT_PAGE_SIZE,
        window_max: int | None = None,
        inline_max: int | None = None,
        first_window: bool = False,
    ) -> None:
        if not 1 <= page_size <= 1000:
            raise ValueError("page_size must be between 1 and 1000")
        self.service = service
        self.caller_for = caller_for
        self.page_size = page_size
        self._window_max = window_max
        """A lower window cap than the settings' (the proxy's, from its host profile)."""
        self._inline_max = inline_max
        """A lower limit than the settings' for an artifact read whole (the proxy's, from its host
        profile)."""
        self.first_window = first_window
        """Answer a URI without a window, of an artifact over the inline limit, with its first window instead
        of ``range_required`` (the proxy's reads, which must fit the host's caps)."""

    def cap_windows(self, window_max: int) -> None:
        """Lower the window and whole-read caps to ``window_max`` from now on (the proxy's host profile,
        known once the client has named itself)."""
        self._window_max = window_max
        self._inline_max = window_max

    @property
    def inline_limit(self) -> int:
        configured = self.service.settings.inline_limit
        return configured if self._inline_max is None else min(configured, self._inline_max)

    @property
    def max_window(self) -> int:
        configured = self.service.settings.mcp_window_max
        return configured if self._window_max is None else min(configured, self._window_max)

    # -- listing ----------------------------------------------------------------------------------------

    def resource_for(self, artifact: Artifact) -> Resource:
        meta: dict[str, Any] = {"sha256": artifact.sha256}
        if artifact.expires_at is not None:
            meta["expiresAt"] = iso_utc(artifact.expires_at)
        return Resource(
            uri=artifact.uri,
            name=artifact.name,
            title=title_of(artifact),
            description=describe(artifact),
            mime_type=artifact.mime_type,
            size=artifact.size,
            annotations=Annotations(last_modified=iso_utc(artifact.created_at)),
            _meta={ARTIFACT_META_KEY: meta},
        )

    @mcp_handler
    async def list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        cursor = params.cursor if params is not None else None
        page = await self.service.list_artifacts(
            require_scope(self.caller_for(ctx), Scope.READ), limit=self.page_size, cursor=cursor
        )
        return ListResourcesResult(
            resources=[self.resource_for(a) for a in page.items],
            next_cursor=page.next_cursor,
            ttl_ms=0,
            cache_scope="private",
        )

    def templates(self) -> list[ResourceTemplate]:
        return [
            ResourceTemplate(
                name="artifact-window",
                title="Artifact byte window",
                uri_template=WINDOW_URI_TEMPLATE,
                description=window_description(
                    self.inline_limit, self.max_window, first_window=self.first_window
                ),
            ),
            *view_templates(self.service.settings),
        ]

    @mcp_handler
    async def list_templates(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListResourceTemplatesResult:
        require_scope(self.caller_for(ctx), Scope.READ)
        if params is not None and params.cursor is not None:
            raise InvalidRequest("invalid cursor")
        return ListResourceTemplatesResult(
            resource_templates=self.templates(), ttl_ms=TEMPLATES_TTL_MS, cache_scope="public"
        )

    # -- reading ----------------------------------------------------------------------------------------

    @mcp_handler
    async def read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: ReadResourceRequestParams
    ) -> ReadResourceResult:
        with view_progress(ctx):
            return await self._read(require_scope(self.caller_for(ctx), Scope.READ), params)

    async def read(self, caller: Caller, uri: str) -> ReadResourceResult:
        """Read a store URI for ``caller``; every failure is the ``MCPError`` ``resources/read`` answers, with
        ``data.uri``."""
        return await self._read(caller, ReadResourceRequestParams(uri=uri))

    @mcp_handler
    async def read_handshake_wire(self, caller: Caller, params: NamesUri) -> dict[str, Any]:
        """What :meth:`read_resource` answers ``caller`` on a handshake-era connection, already in the wire
        form the SDK's result sieve gives it there; failures are the same ``MCPError``.

        For the stdio reads answered beside the SDK's dispatcher
        (:mod:`mcp_resources.transports.stdio_reads`).
        """
        found = await self._contents(require_scope(caller, Scope.READ), params.uri)
        return found.handshake_wire()

    @mcp_handler
    async def _read(self, caller: Caller, params: ReadResourceRequestParams) -> ReadResourceResult:
        found = await self._contents(caller, params.uri)
        return found.result()

    async def _contents(self, caller: Caller, uri: str) -> ReadContents:
        view = parse_view_uri(uri)
        if view is not None:
            return await self._read_view(caller, uri, view)
        ref = parse_store_uri(uri)
        if ref is None:
            raise NotFound()
        if ref.has_window:
            return await self._read_window(caller, uri, ref)
        try:
            return await self._read_whole(caller, uri, ref)
        except RangeRequired:
            if not self.first_window:
                raise
            first = ArtifactRef(ref.artifact_id, offset=0, length=self.max_window, has_window=True)
            return await self._read_window(caller, uri, first)

    def _ttl_ms(self, artifact: Artifact) -> int:
        if artifact.expires_at is None:
            return IMMUTABLE_TTL_MS
        left = (artifact.expires_at - self.service.clock()).total_seconds() * 1000
        return max(0, min(IMMUTABLE_TTL_MS, int(left)))

    def _meta(self, artifact: Artifact, win: Window, data: bytes, next_uri: str | None) -> dict[str, Any]:
        return {
            WINDOW_META_KEY: {
                "offset": win.offset,
                "length": len(data),
                "size": win.size,
                "eof": win.eof,
                "sha256": artifact.sha256,
                "windowSha256": hashlib.sha256(data).hexdigest(),
                "next": next_uri,
            }
        }

    async def _read_whole(self, caller: Caller, uri: str, ref: ArtifactRef) -> ReadContents:
        started = time.monotonic()
        found = await self.service.read_range(caller, ref.artifact_id, self._whole_span)
        artifact = found.artifact
        data = found.data or b""
        self.service.audit.record(
            actor=caller.actor,
            namespace=caller.namespace,
            action="read",
            result="ok",
            artifact_id=artifact.id,
            size=len(data),
            mime_type=artifact.mime_type,
            duration_ms=int((time.monotonic() - started) * 1000),
        )
        meta = self._meta(artifact, Window(0, len(data), artifact.size), data, None)
        text = as_text(artifact.mime_type, data)
        return ReadContents(
            uri=uri,
            mime_type=artifact.mime_type,
            meta=meta,
            text=text,
            blob=base64_text(data) if text is None else None,
            ttl_ms=self._ttl_ms(artifact),
        )

    def _whole_span(self, artifact: Artifact) -> tuple[None, tuple[int, int] | None]:
        """The whole artifact when it fits inline, decided where the lookup ran (one worker call for the
        lookup and the read); larger ones are refused with the first window to read instead."""
        if artifact.size > self.inline_limit:
            first = window_uri(artifact.id, 0, min(self.max_window, artifact.size))
            raise RangeRequired(
                f"artifact is {artifact.size} bytes, more than the {self.inline_limit}-byte inline limit; "
                "read it in "
                f"windows of at most {self.max_window} bytes, starting with {first}",
                size=artifact.size,
                max_window=self.max_window,
                inline_limit=self.inline_limit,
                first=first,
                range_template=WINDOW_URI_TEMPLATE,
            )
        return None, (0, artifact.size) if artifact.size else None

    async def _read_window(self, caller: Caller, uri: str, ref: ArtifactRef) -> ReadContents:
        artifact, win, data = await self.service.read_window(
            caller, ref.artifact_id, ref.offset, ref.length, max_window=self.max_window
        )
        step = min(ref.length or self.max_window, self.max_window)
        next_uri = None if win.eof else window_uri(artifact.id, win.end, step)
        return ReadContents(
            uri=uri,
            mime_type=artifact.mime_type,
            meta=self._meta(artifact, win, data, next_uri),
            text=None,
            blob=base64_text(data),
            ttl_ms=self._ttl_ms(artifact),
        )

    async def _read_view(self, caller: Caller, uri: str, ref: ViewRef) -> ReadContents:
        """A page's text or image, or an audio segment: immutable like the artifact, fresh as long."""
        found = await read_view_uri(views_for(self.service), caller, ref)
        artifact = found.source.artifact
        return ReadContents(
            uri=uri,
            mime_type=found.mime_type,
            meta={VIEW_META_KEY: {**found.meta, "source": artifact.uri}},
            text=found.text,
            blob=base64_text(found.data) if found.data is not None else None,
            ttl_ms=self._ttl_ms(artifact),
        )

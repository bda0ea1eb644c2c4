"""Artifact URIs in tool arguments: replaced by the artifact's bytes where the tool's schema asks for bytes.

A model that holds a ``resource_link`` can pass ``blobstore://artifacts/{id}`` (or a window of it,
``…?offset=&length=``, or a media view of it: ``…/pages/3.png``, ``…/pages/3.txt``,
``…/audio?start=&duration=``) to a tool whose ``inputSchema`` marks an argument as binary content
(:mod:`mcp_resources.tools.binary_schema`), instead of copying megabytes of base64 through its context.
:meth:`ArgumentHandles.resolve` puts the bytes in, in the form the schema asks for (base64, a ``data:`` URL or
text), reading through the service as the caller: the namespace check comes first, so a handle of another
namespace, a guessed id and an expired artifact all fail as the same ``not_found`` as a missing one. Every
handle of a call is looked up and sized before any byte is read; one over the cap
(``BLOBSTORE_PROXY_MAX_ARGUMENT_BYTES``) or a call whose handles together exceed it is refused naming the
cap. A URI at a place the schema does not mark is left as the string it is.

Each resolved handle writes an audit line (``action: "resolve_handle"``) naming the tool, the argument and
the artifact's SHA-256, never content.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import pybase64

from blobstore.audit import AuditLog
from blobstore.auth import require_scope
from blobstore.errors import InvalidRequest, LimitExceeded, NotFound
from blobstore.models import ARTIFACT_URI_PREFIX, Artifact, BlobInfo, Caller, Scope
from blobstore.ranges import Window, window
from blobstore.service import ArtifactService
from blobstore.views.engine import views_for
from mcp_resources.reading.views import ViewRef, parse_view_uri, read_view_uri
from mcp_resources.tools.binary_schema import BinarySite, Form, Slot, slots
from mcp_resources.uris import parse_store_uri

CAP_SETTING: Final = "BLOBSTORE_PROXY_MAX_ARGUMENT_BYTES"
AUDIT_ACTION: Final = "resolve_handle"


def is_handle(value: object) -> bool:
    """True for a string that is meant as an artifact URI (a malformed one included: it is not found)."""
    return isinstance(value, str) and value.startswith(ARTIFACT_URI_PREFIX)


@dataclass(frozen=True, slots=True)
class Located:
    """A handle in a call's arguments, looked up: which artifact, which bytes of it, in which form."""

    slot: Slot
    artifact: Artifact
    """The artifact named, or a view's source."""
    blob: BlobInfo
    span: Window
    view: bytes | None = None
    """A view's bytes (a PDF page's PNG or text, an audio segment's WAV), rendered by the media views."""
    view_type: str | None = None

    @property
    def mime_type(self) -> str:
        return self.view_type or self.artifact.mime_type


def encode(data: bytes, form: Form, mime_type: str) -> str:
    """``data`` in the form an argument asks for."""
    if form is Form.TEXT:
        return data.decode("utf-8")
    text = pybase64.b64encode(data).decode("ascii")
    if form is Form.DATA_URL:
        return f"data:{mime_type};base64,{text}"
    return text


class ArgumentHandles:
    """Resolves artifact URIs in tool arguments for one service (the proxy's, or an embedding server's)."""

    def __init__(
        self, service: ArtifactService, *, max_bytes: int | None = None, audit: AuditLog | None = None
    ) -> None:
        self.service = service
        self.max_bytes = max_bytes if max_bytes is not None else service.settings.proxy_max_argument_bytes
        self.audit = audit or service.audit

    def handle_slots(self, arguments: Mapping[str, Any] | None, sites: list[BinarySite]) -> list[Slot]:
        """The places of ``arguments`` at ``sites`` that hold an artifact URI."""
        return [slot for slot in slots(arguments, sites) if is_handle(slot.value)]

    async def resolve(
        self,
        caller: Caller,
        *,
        tool: str,
        arguments: Mapping[str, Any] | None,
        sites: list[BinarySite],
    ) -> dict[str, Any] | None:
        """``arguments`` with every artifact URI at a binary site replaced by the artifact's bytes.

        Returns the arguments unchanged (the same object) when they hold no handle. Raises the catalogue's
        errors (``not_found``, ``limit_exceeded``, ``invalid_range``, ``invalid_request``, ``forbidden``)
        before any byte is read; the caller turns them into a tool error and calls nothing.
        """
        if not isinstance(arguments, dict):
            return None if arguments is None else dict(arguments)
        if not self.handle_slots(arguments, sites):
            return arguments
        copied: dict[str, Any] = copy.deepcopy(arguments)
        located = await self.locate(caller, self.handle_slots(copied, sites))
        for found in located:
            await self.fill(caller, tool, found)
        return copied

    async def fill(self, caller: Caller, tool: str, found: Located) -> None:
        """Put a located handle's bytes in its place, in the form its site asks for, and audit it."""
        started = time.monotonic()
        data = await self.read(found)
        found.slot.replace(self._encoded(found, data))
        self.audit_resolved(caller, tool, found, started)

    async def locate(self, caller: Caller, handles: list[Slot]) -> list[Located]:
        """Look every handle up as ``caller`` and check the cap, reading nothing yet."""
        require_scope(caller, Scope.READ)
        located: list[Located] = []
        total = 0
        for slot in handles:
            found = await self.look_up(caller, slot)
            self.check_size(found)
            total += found.span.length
            if total > self.max_bytes:
                raise LimitExceeded(
                    f"the artifacts passed to one tool call may carry at most {self.max_bytes} bytes "
                    f"together ({CAP_SETTING}); {slot.name} brings them to {total}",
                    argument=slot.name,
                    max_argument_bytes=self.max_bytes,
                )
            located.append(found)
        return located

    async def look_up(self, caller: Caller, slot: Slot) -> Located:
        """The artifact (and the span of it) a handle names, as ``caller``; ``not_found`` alike for missing,
        malformed, expired and foreign ones."""
        require_scope(caller, Scope.READ)
        uri = slot.value
        ref = parse_store_uri(uri)
        try:
            if ref is None:
                view = parse_view_uri(uri)
                if view is None:
                    raise NotFound()
                return await self._look_up_view(caller, slot, view)
            artifact, blob = await self.service.open_artifact(caller, ref.artifact_id)
        except NotFound:
            raise NotFound(f"{slot.name}: artifact not found", argument=slot.name, uri=uri) from None
        # A window without a length runs to the end of the artifact, not to the MCP read window's maximum.
        return Located(slot, artifact, blob, window(ref.offset, ref.length, artifact.size, artifact.size))

    async def _look_up_view(self, caller: Caller, slot: Slot, ref: ViewRef) -> Located:
        """A page or audio view URI: rendered (or taken from the view cache) now, since a view is bounded by
        its own limits (one page, 30 s of audio) before the cap is checked."""
        contents = await read_view_uri(views_for(self.service), caller, ref)
        data = contents.data if contents.data is not None else (contents.text or "").encode("utf-8")
        source = contents.source
        span = Window(0, len(data), len(data))
        return Located(slot, source.artifact, source.blob, span, view=data, view_type=contents.mime_type)

    def check_size(self, found: Located) -> None:
        """Refuse a handle whose bytes are more than an argument may carry."""
        span, slot, uri = found.span, found.slot, found.slot.value
        if span.length > self.max_bytes:
            raise LimitExceeded(
                f"{slot.name}: {uri} is {span.length} bytes, more than the {self.max_bytes} bytes an "
                f"argument may carry ({CAP_SETTING}); pass a window of it (?offset=&length=) or a smaller "
                "artifact",
                argument=slot.name,
                size=span.length,
                max_argument_bytes=self.max_bytes,
            )

    async def read(self, found: Located) -> bytes:
        """The located bytes (each storage block verified as it is read)."""
        if found.view is not None:
            return found.view
        span = found.span
        if not span.length:
            return b""
        parts = [piece async for piece in self.service.stream(found.blob, span.offset, span.end)]
        return b"".join(parts)

    def _encoded(self, found: Located, data: bytes) -> str:
        try:
            return encode(data, found.slot.site.form, found.mime_type)
        except UnicodeDecodeError:
            raise InvalidRequest(
                f"{found.slot.name} wants text and {found.slot.value} is not UTF-8 text",
                argument=found.slot.name,
            ) from None

    def audit_resolved(self, caller: Caller, tool: str, found: Located, started: float) -> None:
        self.audit.record(
            actor=caller.actor,
            namespace=caller.namespace,
            action=AUDIT_ACTION,
            result="ok",
            artifact_id=found.artifact.id,
            size=found.span.length,
            mime_type=found.mime_type,
            duration_ms=int((time.monotonic() - started) * 1000),
            extra={
                "tool": tool,
                "argument": found.slot.name,
                "sha256": found.artifact.sha256,
                "view": found.view_type,
                "form": found.slot.site.form.value,
            },
        )


__all__ = ["AUDIT_ACTION", "CAP_SETTING", "ArgumentHandles", "Located", "encode", "is_handle"]

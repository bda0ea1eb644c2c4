"""Typed media results: a tool that returns ``Image``, ``Audio``, ``Video`` or ``Document`` (alone, in a list,
or beside text) has each stored as an artifact and answered by the store's rules.

Each media value becomes the blocks :func:`~mcp_resources.results.content.tool_result_for` makes for its
artifact (a text summary, then an inline image, downscaled to the long-edge budget, or audio block under the
inline limit, else a ``resource_link`` and how to read it), in the place the tool put it; text stays text.
An ``Audio`` result also carries what was said in it (its transcript, :mod:`blobstore.views.text_views`)
after its summary line: the words first, the sound as evidence, and a host that cannot hear still learns them.
``structuredContent`` is ``{"result": …}`` with each media value as its stored artifact (URI, type, size,
SHA-256, facts), never its bytes, and the tool's ``outputSchema`` says so (:func:`output_schema`). A value
that came in as an argument and is returned unchanged is answered with the artifact it already is.
"""

from __future__ import annotations

import json
import typing
from collections.abc import AsyncIterator, Callable
from typing import Any, Final

from mcp.types import CallToolResult, ContentBlock, TextContent
from pydantic import TypeAdapter

from blobstore.errors import BlobstoreError, Internal
from blobstore.models import Artifact, Caller
from blobstore.service import ArtifactService
from blobstore.views.engine import views_for
from blobstore.views.text_views import modality_of, text_view
from mcp_resources.results.content import tool_result_for
from mcp_resources.results.renditions import RenditionCache
from mcp_resources.tools.media_params import Media, stored_forms

_FACT_NAMES: Final = {
    "width": "width",
    "height": "height",
    "duration_seconds": "durationSeconds",
    "sample_rate": "sampleRate",
    "pages": "pages",
}
_CONTENT_TYPES: Final = typing.get_args(ContentBlock)


def mentions_media(annotation: Any) -> bool:
    """Whether a return annotation holds a typed media class anywhere (``Image``, ``list[str | Image]``)."""
    if isinstance(annotation, type) and issubclass(annotation, Media):
        return True
    return any(mentions_media(arg) for arg in typing.get_args(annotation))


def return_annotation(fn: Callable[..., Any]) -> Any:
    """A tool function's return annotation, resolved (None when it has none)."""
    try:
        return typing.get_type_hints(fn, include_extras=True).get("return")
    except (NameError, TypeError):
        return None


def output_schema(annotation: Any) -> dict[str, Any]:
    """The ``outputSchema`` of a tool returning ``annotation``: ``{"result": …}`` with each typed media value
    as the artifact it was stored as (:func:`~mcp_resources.tools.media_params.result_schema`)."""
    schema = TypeAdapter(annotation).json_schema(mode="serialization")
    defs = schema.pop("$defs", None)
    wrapped: dict[str, Any] = {
        "type": "object",
        "properties": {"result": schema},
        "required": ["result"],
    }
    if defs:
        wrapped["$defs"] = defs
    return wrapped


def stored_form(media: Media, artifact: Artifact) -> dict[str, Any]:
    form: dict[str, Any] = {
        "type": media.kind,
        "uri": artifact.uri,
        "name": artifact.name,
        "mimeType": artifact.mime_type,
        "size": artifact.size,
        "sha256": artifact.sha256,
        "format": media.format,
    }
    for key, name in _FACT_NAMES.items():
        if key in artifact.media:
            form[name] = artifact.media[key]
    return form


def _media_values(value: Any) -> list[Media]:
    if isinstance(value, Media):
        return [value]
    if isinstance(value, list | tuple):
        return [found for item in value for found in _media_values(item)]
    if isinstance(value, dict):
        return [found for item in value.values() for found in _media_values(item)]
    return []


async def _store(service: ArtifactService, caller: Caller, tool: str, media: Media) -> Artifact:
    if media.artifact is not None:
        return media.artifact
    name = media.name or f"{tool}.{media.format}"

    async def pieces() -> AsyncIterator[bytes]:
        async for piece in media.stream():
            yield piece

    return await service.create_artifact(
        caller,
        pieces(),
        name=name,
        mime_type=media.mime_type,
        expected_size=media.size,
        metadata={"tool": tool},
    )


async def _said(service: ArtifactService, caller: Caller, artifact: Artifact) -> list[ContentBlock]:
    """A recording's transcript as one text block, or a line saying why it has none; nothing for other
    media."""
    if modality_of(artifact.mime_type) != "audio":
        return []
    views = views_for(service)
    try:
        found = await text_view(views, await views.open(caller, artifact.id))
    except Internal:
        raise
    except BlobstoreError as exc:
        # The result stands without its words: the recording is stored and linked all the same.
        return [TextContent(text=f"No transcript: {exc.message}")]
    if found is None:
        return []
    return [TextContent(text=f"Its {found.what} ({found.head}):\n{found.text or '(no speech)'}")]


def _blocks(value: Any, evidence: dict[int, list[ContentBlock]]) -> list[ContentBlock]:
    """The content of a result, in the tool's order: each media value as its blocks, text as text."""
    if isinstance(value, Media):
        return evidence[id(value)]
    if isinstance(value, _CONTENT_TYPES):
        return [value]
    if isinstance(value, list | tuple):
        return [block for item in value for block in _blocks(item, evidence)]
    if isinstance(value, dict):
        return [block for item in value.values() for block in _blocks(item, evidence)]
    if isinstance(value, str):
        return [TextContent(text=value)]
    return []


async def media_result(
    value: Any,
    annotation: Any,
    *,
    tool: str,
    service: ArtifactService,
    caller: Caller,
    renditions: RenditionCache,
) -> CallToolResult:
    """The answer to a call whose tool returned ``value`` (declared as ``annotation``)."""
    forms: dict[int, dict[str, Any]] = {}
    evidence: dict[int, list[ContentBlock]] = {}
    for media in _media_values(value):
        if id(media) in forms:
            continue
        artifact = await _store(service, caller, tool, media)
        forms[id(media)] = stored_form(media, artifact)
        answered = await tool_result_for(artifact, service=service, caller=caller, renditions=renditions)
        blocks = list(answered.content)
        evidence[id(media)] = [*blocks[:1], *await _said(service, caller, artifact), *blocks[1:]]
    with stored_forms(forms):
        structured = TypeAdapter(annotation).dump_python(value, mode="json")
    content = _blocks(value, evidence)
    if not content:
        # A value with no text or media of its own (a number, a mapping): its JSON, as the SDK words it.
        content = [TextContent(text=json.dumps(structured, indent=2))]
    return CallToolResult(content=content, structured_content={"result": structured})


__all__ = [
    "media_result",
    "mentions_media",
    "output_schema",
    "return_annotation",
    "stored_form",
]

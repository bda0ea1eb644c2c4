"""Media views on the MCP edge: ``read_artifact``'s view arguments, the view resources, and answers as
content blocks, for every view kind (:data:`blobstore.views.kinds.KINDS`).

The views themselves (decoding, limits, the cache, the words) are :mod:`blobstore.views`; this module offers
what each kind declares and turns its neutral answers into content blocks and resource contents. Every tool
answer is ``[text saying what it is, the view's blocks, text saying how to read the next piece]``. Its page
texts and binary blocks share one budget, the larger of the inline limit and the window maximum (a view is
bounded by its own limits already: ten pages, 30 s, eight frames); a block past it becomes a
``resource_link`` to the view's own URI, which ``resources/read`` returns whole.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from mcp.types import (
    AudioContent,
    CallToolResult,
    ContentBlock,
    ImageContent,
    ResourceLink,
    ResourceTemplate,
    TextContent,
)
from pydantic import Field
from pydantic.fields import FieldInfo

from blobstore.config import Settings
from blobstore.models import ARTIFACT_URI_PREFIX, Artifact, Caller
from blobstore.views.kind import (
    Argument,
    Budget,
    Contents,
    Engine,
    Inline,
    Item,
    Resource,
    Text,
    arguments_of,
    choose,
    words,
)
from blobstore.views.kinds import KINDS
from blobstore.views.kinds.pages import page_uri
from blobstore.views.kinds.segments import audio_uri

_ARTIFACT_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,200}")


def view_arguments() -> list[Argument]:
    """``read_artifact``'s view arguments (:func:`~blobstore.views.kind.arguments_of` the kinds)."""
    return arguments_of(KINDS)


def view_fields(settings: Settings) -> dict[str, tuple[Any, FieldInfo]]:
    """The view arguments as fields of ``read_artifact``'s argument model, stating this server's limits."""
    return {
        argument.name: (
            argument.annotation,
            Field(
                default=argument.default, description=words(argument.description, settings), **argument.bounds
            ),
        )
        for argument in view_arguments()
    }


def views_phrase() -> str:
    """What ``read_artifact``'s description says of the views: each kind's phrase."""
    return ", ".join(kind.phrase for kind in KINDS)


def asks_for_a_view(values: Mapping[str, Any]) -> bool:
    """Whether a call's view arguments ask for a view: any of them other than its default (a page_format or
    frames_layout other than its default too, so that it is refused without its pages or frames rather than
    ignored by a byte read)."""
    return any(
        values.get(argument.name, argument.default) != argument.default for argument in view_arguments()
    )


def first_view_uri(artifact: Artifact, max_audio_seconds: float = 30.0) -> str | None:
    """The view resource to read first, for hosts that read resources but call no tools: page 1's text of a
    PDF (its image when the PDF has no text layer), the first segment of audio or video; None otherwise
    (and for a PDF or recording whose facts are unknown)."""
    media = artifact.media or {}
    if media.get("pages"):
        return page_uri(artifact.id, 1, "txt" if media.get("text_layer") else "png")
    duration = media.get("duration_seconds")
    if (
        artifact.mime_type.startswith(("audio/", "video/"))
        and isinstance(duration, int | float)
        and duration > 0
    ):
        return audio_uri(artifact.id, 0, round(min(max_audio_seconds, duration), 3))
    return None


# -- view resources ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ViewRef:
    """A parsed view URI: the artifact, which view resource (``kind``: ``page_text``, ``audio``, …), and the
    values its path and query name, read as attributes too (``ref.page``, ``ref.start``)."""

    artifact_id: str
    kind: str
    values: Mapping[str, Any]
    resource: Resource

    def __getattr__(self, name: str) -> Any:
        try:
            return self.values[name]
        except KeyError:
            raise AttributeError(name) from None


def _resources() -> list[Resource]:
    return [resource for kind in KINDS for resource in kind.resources]


def parse_view_uri(uri: str) -> ViewRef | None:
    """A view resource's URI, or None for any other URI (an artifact, a window, a stranger)."""
    if not uri.startswith(ARTIFACT_URI_PREFIX) or len(uri) > 2048:
        return None
    path, _, query = uri[len(ARTIFACT_URI_PREFIX) :].partition("?")
    artifact_id, _, rest = path.partition("/")
    if _ARTIFACT_ID.fullmatch(artifact_id) is None:
        return None
    for resource in _resources():
        match = resource.path.fullmatch(rest)
        if match is not None:
            values = resource.values(match.groupdict(), query)
            return ViewRef(artifact_id, resource.ref, values, resource)
    return None


async def read_view_uri(views: Engine, caller: Caller, ref: ViewRef) -> Contents:
    return await ref.resource.read(views, caller, ref.artifact_id, ref.values)


def view_templates(settings: Settings | None = None) -> list[ResourceTemplate]:
    """The view resources' templates, stating this server's budgets (a model reads the numbers); without
    settings, the defaults'."""
    settings = settings if settings is not None else Settings.model_construct()
    return [
        ResourceTemplate(
            name=resource.name,
            title=resource.title,
            uri_template=resource.template,
            mime_type=resource.mime_type,
            description=words(resource.description, settings),
        )
        for resource in _resources()
    ]


# -- read_artifact ----------------------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _block(item: Item) -> ContentBlock:
    if isinstance(item, Text):
        return TextContent(text=item.text)
    if isinstance(item, Inline):
        if item.mime_type.startswith("audio/"):
            return AudioContent(data=_b64(item.data), mime_type=item.mime_type)
        return ImageContent(data=_b64(item.data), mime_type=item.mime_type)
    described = {"description": item.description} if item.description is not None else {}
    return ResourceLink(uri=item.uri, name=item.name, mime_type=item.mime_type, size=item.size, **described)


async def view_result(
    views: Engine,
    caller: Caller,
    artifact_id: str,
    values: Mapping[str, Any],
    *,
    budget: int,
    include_media: bool | None = None,
) -> CallToolResult | None:
    """The answer to a ``read_artifact`` call with view arguments: of the one kind they ask for, in text
    alone when ``include_media`` is false. None when that kind has no text of its own: its source's text
    view answers (:mod:`blobstore.views.text_views`)."""
    values = {argument.name: values.get(argument.name, argument.default) for argument in view_arguments()}
    kind = choose(KINDS, values)
    answer_of = kind.answer if include_media is not False else kind.text
    if answer_of is None:
        return None
    answer = await answer_of(views, caller, artifact_id, values, Budget(budget))
    blocks = [
        TextContent(text=answer.head),
        *(_block(item) for item in answer.items),
        TextContent(text=answer.tail),
    ]
    return CallToolResult(content=blocks, structured_content={"view": answer.facts})

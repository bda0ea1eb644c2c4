"""The ``resource_link`` block that names an artifact, the same from every edge that hands one out.

The HTTP API returns it with every artifact and the MCP edge returns it from tools, so both import it from
here, below either of them. It is the block's JSON form (camelCase, no null members): this module needs
nothing of the MCP SDK, and the MCP edge validates it into the SDK's ``ResourceLink``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final, Literal, TypedDict

from blobstore.media import first_view_hint, speech_words
from blobstore.models import ARTIFACT_URI_PREFIX, Artifact
from blobstore.units import human_bytes

ARTIFACT_URI_TEMPLATE: Final = ARTIFACT_URI_PREFIX + "{artifact_id}"
WINDOW_URI_TEMPLATE: Final = ARTIFACT_URI_PREFIX + "{artifact_id}{?offset,length}"
META_PREFIX: Final = "dev.blobstore"
"""Our ``_meta`` key prefix: dotted, and without an ``mcp``/``modelcontextprotocol`` label (those are
reserved).
"""
ARTIFACT_META_KEY: Final = f"{META_PREFIX}/artifact"
DEFAULT_MAX_WINDOW: Final = 1024 * 1024

Role = Literal["user", "assistant"]


class LinkOptions(TypedDict, total=False):
    """The keyword arguments of :func:`resource_link`, for the helpers that pass them on."""

    title: str | None
    description: str | None
    audience: list[Role] | None
    priority: float | None
    max_window: int


def iso_utc(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def describe(artifact: Artifact) -> str:
    """One line a model can budget with: type, size, and media facts when known."""
    parts = [artifact.mime_type, human_bytes(artifact.size, byte_unit="bytes")]
    media = artifact.media or {}
    if media.get("width") and media.get("height"):
        parts.append(f"{media['width']}x{media['height']} px")
    if media.get("duration_seconds") is not None:
        parts.append(f"{media['duration_seconds']:.1f} s")
        speech = speech_words(media)
        if speech:
            parts.append(speech)
    if media.get("pages"):
        parts.append(f"{media['pages']} page{'s' if media['pages'] != 1 else ''}")
        parts.append("text layer" if media.get("text_layer") else "no text layer")
    return f"{artifact.name} ({', '.join(parts)})"


def view_hint(
    artifact: Artifact, *, tool: str = "read_artifact", max_audio_seconds: float = 30.0
) -> str | None:
    """The media view to read first, from the artifact's facts: ``read page 1 with read_artifact(uri,
    pages="1")`` for a PDF, the first segment of audio, keyframes of video; None for other types."""
    return first_view_hint(artifact.mime_type, artifact.media or {}, max_audio_seconds, tool)


def describe_with_view(artifact: Artifact) -> str:
    """:func:`describe` followed by :func:`view_hint` when there is one (a ``resource_link``'s description,
    the line beside an offloaded or linked artifact)."""
    hint = view_hint(artifact)
    return f"{describe(artifact)}; {hint}" if hint else describe(artifact)


def title_of(artifact: Artifact) -> str:
    title = (artifact.metadata or {}).get("title")
    return title if isinstance(title, str) and title else artifact.name


def resource_link(
    artifact: Artifact,
    *,
    title: str | None = None,
    description: str | None = None,
    audience: list[Role] | None = None,
    priority: float | None = None,
    max_window: int = DEFAULT_MAX_WINDOW,
) -> dict[str, Any]:
    """The ``resource_link`` block for an artifact, as it goes on the wire.

    It carries uri, name, title, mimeType, size, description and annotations (lastModified, plus audience and
    priority when given), and the window template under ``_meta``.
    """
    annotations: dict[str, Any] = {"lastModified": iso_utc(artifact.created_at)}
    if audience is not None:
        annotations["audience"] = list(audience)
    if priority is not None:
        annotations["priority"] = priority
    return {
        "type": "resource_link",
        "uri": artifact.uri,
        "name": artifact.name,
        "title": title or title_of(artifact),
        "mimeType": artifact.mime_type,
        "size": artifact.size,
        "description": description or describe_with_view(artifact),
        "annotations": annotations,
        "_meta": {
            ARTIFACT_META_KEY: {
                "sha256": artifact.sha256,
                "rangeTemplate": WINDOW_URI_TEMPLATE.replace("{artifact_id}", artifact.id),
                "maxWindow": max_window,
            }
        },
    }

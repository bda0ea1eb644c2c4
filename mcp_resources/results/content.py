"""Tool-result helpers for tool-server authors: give a reference, not the content; give text, not pixels.

:func:`tool_result_for` builds ``[text summary, evidence]`` where the evidence is an inline
``image``/``audio`` block when it fits under the inline limit (512 KiB default) and a ``resource_link``
otherwise. Images are first downscaled to the long-edge budget (1024 px default), because image tokens follow
decoded pixels, not bytes: a recompressed 4K screenshot costs as much as the original. Downscales are cached
by
``sha256(source digest + parameters + version)`` (:mod:`mcp_resources.results.renditions`).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal, Unpack

from mcp.types import (
    AudioContent,
    CallToolResult,
    ContentBlock,
    ImageContent,
    ResourceLink,
    TextContent,
)

from blobstore.links import ARTIFACT_META_KEY, LinkOptions, Role, describe, resource_link, view_hint
from blobstore.models import Artifact, Caller
from blobstore.tokens import estimate_image_tokens
from mcp_resources.results.renditions import (
    MAX_DECODE_PIXELS,
    NotAnImage,
    Rendition,
    RenditionCache,
    downscale_async,
    rendition_key,
)
from mcp_resources.uris import window_uri

if TYPE_CHECKING:
    from blobstore.service import ArtifactService

DEFAULT_INLINE_LIMIT: Final = 512 * 1024
DEFAULT_LONG_EDGE: Final = 1024
MAX_DECODE_BYTES: Final = 32 * 1024 * 1024
"""Images larger than this (encoded) are linked, never decoded: decoding needs the whole file in memory."""

INLINE_IMAGE_TYPES: Final = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
INLINE_AUDIO_TYPES: Final = frozenset(
    {
        "audio/wav",
        "audio/x-wav",
        "audio/wave",
        "audio/mpeg",
        "audio/ogg",
        "audio/flac",
        "audio/webm",
        "audio/mp4",
    }
)

# -- links ----------------------------------------------------------------------------------------------


def resource_link_for(artifact: Artifact, **options: Unpack[LinkOptions]) -> ResourceLink:
    """A ``resource_link`` block for an artifact (``title``, ``description``, ``audience``, ``priority``,
    ``max_window``): :func:`blobstore.links.resource_link` as the SDK's type."""
    return ResourceLink.model_validate(resource_link(artifact, **options))


# -- tool results ---------------------------------------------------------------------------------------


def read_in_windows(artifact: Artifact, max_window: int) -> str:
    """How to read an artifact through ``resources/read`` alone, naming its first window; the end of the
    line beside a link from :func:`tool_result_for` and from the proxy."""
    first = window_uri(artifact.id, 0, min(max_window, max(artifact.size, 1)))
    return f"read it with resources/read in windows of at most {max_window} bytes: {first}"


def read_with_tool(artifact: Artifact, *, tool: str, max_window: int, max_audio_seconds: float = 30.0) -> str:
    """How to read an artifact where the read tool is offered: its first media view, if it has one, then byte
    windows with the tool or with ``resources/read``. The end of the line beside a link from the store's own
    tools (``upload_commit``) and from the proxy."""
    view = view_hint(artifact, tool=tool, max_audio_seconds=max_audio_seconds)
    views = f"{view}, or " if view else ""
    first = window_uri(artifact.id, 0, min(max_window, max(artifact.size, 1)))
    return (
        f"{views}read it with the {tool} tool (uri={artifact.uri}, offset, length; at most {max_window} "
        f"bytes per call) or with resources/read: {first}"
    )


async def _read_bytes(service: ArtifactService, caller: Caller, artifact: Artifact) -> bytes:
    _, data = await service.read_all(caller, artifact.id, limit=max(artifact.size, 0))
    return data


@dataclass(frozen=True, slots=True)
class NotShown:
    """Why an image is linked rather than shown inline, as it happened; the proxy's line words it
    (:func:`mcp_resources.proxy.lines.image_linked_line`)."""

    cause: Literal["type", "source_size", "inline_limit", "downscaled", "pixels", "undecodable", "budget"]
    """``type``: not a type hosts show inline; ``source_size``: over :data:`MAX_DECODE_BYTES` (``limit``);
    ``inline_limit``: within the pixel budget but over the inline limit (``limit``); ``downscaled``: its
    downscale to ``edge`` is still over the inline limit; ``pixels``: more pixels (``pixels``; 0 = unknown)
    than the decoder takes (``limit``); ``undecodable``: the decoder refused it (``reason``); ``budget``: the
    result is over the host's caps even with the image downscaled as far as it goes."""
    limit: int = 0
    edge: int = 0
    pixels: int = 0
    reason: str = ""


async def inline_image_for(
    artifact: Artifact,
    *,
    service: ArtifactService,
    caller: Caller,
    inline_limit: int,
    long_edge: int,
    renditions: RenditionCache,
    jpeg_fallback: bool = False,
) -> ImageContent | NotShown:
    """The image as an inline block within the pixel and byte budgets, or why it must be linked.

    With ``jpeg_fallback``, a downscale that is still over ``inline_limit`` is tried once more as JPEG (a
    photo saved as PNG is several times smaller as JPEG at the same size).
    """
    if artifact.mime_type not in INLINE_IMAGE_TYPES:
        return NotShown("type")
    if artifact.size > MAX_DECODE_BYTES:
        return NotShown("source_size", limit=MAX_DECODE_BYTES)
    media = artifact.media or {}
    width, height = media.get("width"), media.get("height")
    fits_pixels = isinstance(width, int) and isinstance(height, int) and max(width, height) <= long_edge
    if fits_pixels and artifact.size <= inline_limit:
        data = await _read_bytes(service, caller, artifact)
        return ImageContent(data=base64.b64encode(data).decode("ascii"), mime_type=artifact.mime_type)
    if fits_pixels:
        # Already within the pixel budget: re-encoding would not make it cheaper for the model, only smaller.
        return NotShown("inline_limit", limit=inline_limit)
    key = rendition_key(artifact.sha256, {"op": "fit_long_edge", "long_edge": long_edge})

    async def compute() -> Rendition:
        return await downscale_async(await _read_bytes(service, caller, artifact), long_edge)

    try:
        rendition = await renditions.get_or_create(key, compute)
        if len(rendition.data) > inline_limit and jpeg_fallback and rendition.mime_type != "image/jpeg":
            jpeg_key = rendition_key(
                artifact.sha256, {"op": "fit_long_edge", "long_edge": long_edge, "format": "jpeg"}
            )

            async def compute_jpeg() -> Rendition:
                data = await _read_bytes(service, caller, artifact)
                return await downscale_async(data, long_edge, as_jpeg=True)

            rendition = await renditions.get_or_create(jpeg_key, compute_jpeg)
    except NotAnImage as exc:
        if exc.pixels is not None:
            return NotShown("pixels", limit=MAX_DECODE_PIXELS, pixels=exc.pixels)
        return NotShown("undecodable", reason=exc.reason)
    if len(rendition.data) > inline_limit:
        return NotShown("downscaled", limit=inline_limit, edge=long_edge)
    return ImageContent(
        data=base64.b64encode(rendition.data).decode("ascii"),
        mime_type=rendition.mime_type,
        _meta={
            ARTIFACT_META_KEY: {"width": rendition.width, "height": rendition.height, "source": artifact.uri}
        },
    )


async def image_block_for(
    artifact: Artifact,
    *,
    service: ArtifactService,
    caller: Caller,
    inline_limit: int,
    long_edge: int,
    renditions: RenditionCache,
    jpeg_fallback: bool = False,
) -> ImageContent | None:
    """:func:`inline_image_for`, None when the image must be linked."""
    image = await inline_image_for(
        artifact,
        service=service,
        caller=caller,
        inline_limit=inline_limit,
        long_edge=long_edge,
        renditions=renditions,
        jpeg_fallback=jpeg_fallback,
    )
    return None if isinstance(image, NotShown) else image


_DEFAULT_RENDITIONS = RenditionCache()


async def tool_result_for(
    artifact: Artifact,
    *,
    summary: str | None = None,
    service: ArtifactService,
    caller: Caller,
    inline_limit: int | None = None,
    long_edge: int | None = None,
    renditions: RenditionCache | None = None,
    audience: list[Role] | None = None,
) -> CallToolResult:
    """``[text summary, image | audio | resource_link]`` for a stored artifact, by the seeds' rules.

    The summary comes first (clients render and inject in order, and models without vision still get the
    facts); then an inline image (downscaled to ``long_edge`` first) or audio block if it fits under
    ``inline_limit``, else a ``resource_link`` with the size, so the host decides whether and which windows to
    read.
    """
    settings = service.settings
    limit = settings.inline_limit if inline_limit is None else inline_limit
    edge = settings.image_long_edge if long_edge is None else long_edge
    text = summary or describe(artifact)
    evidence: ContentBlock | None = None
    if artifact.mime_type.startswith("image/"):
        image = await image_block_for(
            artifact,
            service=service,
            caller=caller,
            inline_limit=limit,
            long_edge=edge,
            renditions=renditions or _DEFAULT_RENDITIONS,
        )
        if image is not None:
            meta = (image.meta or {}).get(ARTIFACT_META_KEY, {})
            w = meta.get("width") or artifact.media.get("width")
            h = meta.get("height") or artifact.media.get("height")
            if isinstance(w, int) and isinstance(h, int):
                tokens = estimate_image_tokens(w, h)
                text += f"\n[image {w}x{h} px inline, about {tokens} tokens; original: {artifact.uri}]"
            evidence = image
    elif artifact.mime_type in INLINE_AUDIO_TYPES and artifact.size <= limit:
        data = await _read_bytes(service, caller, artifact)
        evidence = AudioContent(data=base64.b64encode(data).decode("ascii"), mime_type=artifact.mime_type)
    if evidence is None:
        evidence = resource_link_for(artifact, audience=audience, max_window=settings.mcp_window_max)
        hint = view_hint(artifact, max_audio_seconds=settings.view_max_audio_seconds)
        views = f"{hint}, or " if hint else ""
        windows = read_in_windows(artifact, settings.mcp_window_max)
        text += f"\n[{describe(artifact)} stored as {artifact.uri}; {views}{windows}]"
    return CallToolResult(content=[TextContent(text=text), evidence])

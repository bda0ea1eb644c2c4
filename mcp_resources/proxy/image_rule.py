"""The offload rule for ``image`` blocks: stored when too large, shown downscaled where that fits.

An image over the long-edge budget or the inline limit, or one that cannot be decoded, is stored; the model
gets a text line, the image downscaled to the budget when that fits the inline limit (through the rendition
cache, PNG or a JPEG fallback for photos), and a ``resource_link`` to the original.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

from blobstore.models import Artifact
from mcp_resources.proxy.items import Item
from mcp_resources.proxy.lines import image_linked_line, image_shown_line
from mcp_resources.proxy.measure import image_size
from mcp_resources.proxy.rules import HostProfile, ToolRules
from mcp_resources.results.content import NotShown

MIN_IMAGE_EDGE: Final = 256
"""Over the budget, inline images are halved down to this long edge before they are only linked."""

Downscale = Callable[[Artifact, int], Awaitable[dict[str, Any] | NotShown]]
"""The artifact downscaled to a long edge as an inline image block, or why that does not fit."""


def image_due(item: Item, rules: ToolRules, edge: int) -> bool:
    if rules.mode == "always" or item.size > rules.inline_limit:
        return True
    size = image_size(item.original)
    return size is None or max(size) > edge


def halved_edge(item: Item) -> int | None:
    """The long edge the image shrinks to next over the budget, or None when only a link is left."""
    shown = item.inline_image if item.level > 0 else item.original
    size = image_size(shown) if shown is not None else None
    if size is not None and max(size) // 2 >= MIN_IMAGE_EDGE:
        return max(size) // 2
    return None


async def render_image(
    item: Item,
    artifact: Artifact,
    *,
    link: dict[str, Any],
    read: str,
    level: int,
    edge: int,
    profile: HostProfile,
    downscale: Downscale,
) -> None:
    """Level 1: the line, the image downscaled to ``edge`` where that fits, and the link; level 2 (the result
    is over the host's caps even so): the line and the link. The line says why an image is not shown."""
    image = await downscale(artifact, edge) if level == 1 else NotShown("budget")
    if not isinstance(image, NotShown):
        line = image_shown_line(artifact, image_size(image), read)
        item.show([{"type": "text", "text": line}, image, link], level=level, inline_image=image)
    else:
        line = image_linked_line(artifact, image, profile, read)
        item.show([{"type": "text", "text": line}, link], level=level)

"""The offload rule for ``image`` and ``audio`` blocks a host's model cannot take (its profile says so,
:meth:`~mcp_resources.proxy.rules.HostProfile.takes`): stored whatever their size, and shown as their text
view instead (:mod:`blobstore.views.text_views`: the OCR text of a screenshot, the transcript of a recording
once it has one), within the tool's text threshold, with a ``resource_link`` to the original. Without a text
view (none registered, or no OCR engine) the line says why, beside the link.
"""

from __future__ import annotations

from typing import Any

from blobstore.errors import BlobstoreError
from blobstore.models import Artifact, Caller
from blobstore.views.engine import MediaViews
from blobstore.views.text_views import text_view
from mcp_resources.proxy.items import Item
from mcp_resources.proxy.lines import no_text_view_line, text_view_line
from mcp_resources.proxy.rules import HostProfile, ToolRules


def modality_due(item: Item, profile: HostProfile) -> bool:
    """Whether ``item`` is a block of a modality the host's model does not take."""
    return item.kind in ("image", "audio") and not profile.takes(item.kind)


async def render_text_view(
    item: Item,
    artifact: Artifact,
    *,
    views: MediaViews,
    caller: Caller,
    link: dict[str, Any],
    read: str,
    level: int,
    profile: HostProfile,
    rules: ToolRules,
) -> None:
    """Level 1: the line, the text view (cut to the tool's text threshold) and the link; level 2 (the result
    is over the host's caps even so): the line and the link."""
    modality = item.kind
    try:
        found = await text_view(views, await views.open(caller, artifact.id)) if level == 1 else None
        why = "none is made for it" if level == 1 else "the result is over the host's caps"
    except BlobstoreError as exc:
        found, why = None, exc.message
    if found is None:
        line = no_text_view_line(artifact, modality=modality, why=why, profile=profile, read=read)
        item.show([{"type": "text", "text": line}, link], level=level)
        return
    text = found.text
    cut = None
    if len(text) > rules.text_threshold:
        cut = rules.text_preview
        text = text[:cut]
    line = text_view_line(
        artifact, modality=modality, what=found.what, head=found.head, cut=cut, profile=profile, read=read
    )
    item.show(
        [{"type": "text", "text": line}, {"type": "text", "text": text or "(no text)"}, link], level=level
    )

"""``read_artifact``'s answer in text where a host's model cannot take the media (or
``include_media=false`` asks for text): the artifact's text view (:mod:`blobstore.views.text_views`: the OCR
text of an image, the transcript of a recording) with a ``resource_link`` to the original, instead of its
bytes."""

from __future__ import annotations

from mcp.types import CallToolResult, TextContent

from blobstore.links import describe
from blobstore.models import Caller
from blobstore.tokens import estimate_text_tokens
from blobstore.views.engine import MediaViews
from blobstore.views.text_views import modality_of, text_view
from mcp_resources.results.content import resource_link_for


async def text_answer(
    views: MediaViews, caller: Caller, artifact_id: str, *, why: str, max_window: int
) -> CallToolResult | None:
    """The text view of the caller's artifact as a tool answer, saying ``why`` it comes as text; None for an
    artifact of no modality with a text view (read as bytes as ever). The view's own errors
    (``unsupported_media`` without an OCR engine, ``view_too_large``) are raised."""
    source = await views.open(caller, artifact_id)
    modality = modality_of(source.artifact.mime_type)
    if modality is None:
        return None
    found = await text_view(views, source)
    if found is None:
        return None
    artifact = source.artifact
    head = (
        f"{describe(artifact)}: its {found.what} in place of the {modality} ({why}); {found.head}; "
        f"about {estimate_text_tokens(found.text)} tokens."
    )
    link = resource_link_for(artifact, max_window=max_window)
    tail = "The original is linked: read_artifact(uri, include_media=true) for the media itself."
    structured = {
        "view": {
            "kind": "text",
            "modality": modality,
            "what": found.what,
            "estimated_tokens": estimate_text_tokens(found.text),
        }
    }
    return CallToolResult(
        content=[
            TextContent(text=head),
            TextContent(text=found.text or "(no text)"),
            link,
            TextContent(text=tail),
        ],
        structured_content=structured,
    )

"""The offload rule for ``audio`` blocks and embedded ``resource`` blobs: stored over the inline limit.

The model gets a text line (type, size, the duration of WAV audio, the resource's URI) and a
``resource_link``; an embedded resource's artifact takes the last segment of its URI as its name.
"""

from __future__ import annotations

import logging
from typing import Any

from blobstore.models import Artifact
from mcp_resources.proxy.items import Call, Item, dropped_item
from mcp_resources.proxy.lines import media_line
from mcp_resources.proxy.long_values import StagedPayload
from mcp_resources.proxy.measure import decode_base64
from mcp_resources.proxy.names import uri_leaf, usable_name
from mcp_resources.proxy.rules import ToolRules

logger = logging.getLogger("mcp_resources.proxy")


def blob_item(block: dict[str, Any], resource: dict[str, Any], call: Call, index: int) -> Item:
    mime = str(resource.get("mimeType") or "") or "application/octet-stream"
    leaf = uri_leaf(str(resource.get("uri") or ""))
    name = leaf if usable_name(leaf) else call.payload_name(index, mime)
    blob = resource["blob"]
    if isinstance(blob, StagedPayload):
        if not blob.valid:
            return dropped_item(block, call, index, "resource", blob)
        return Item(original=block, kind="blob", payload=blob, staged=blob, mime_type=mime, name=name)
    raw = decode_base64(blob)
    if raw is None:
        logger.warning("tool %s: resource block %d is not valid base64; left as is", call.tool, index)
        return Item(original=block, kind="other")
    return Item(original=block, kind="blob", payload=blob, raw=raw, mime_type=mime, name=name)


def media_due(item: Item, rules: ToolRules) -> bool:
    return rules.mode == "always" or item.size > rules.inline_limit


def render_media(item: Item, artifact: Artifact, *, link: dict[str, Any], read: str, level: int) -> None:
    source = None
    if item.kind == "blob":
        uri = (item.original.get("resource") or {}).get("uri")
        source = uri if isinstance(uri, str) and uri else None
    line = media_line(artifact, audio=item.kind == "audio", source_uri=source, read=read)
    item.show([{"type": "text", "text": line}, link], level=level)

"""The offload rule for ``text`` blocks and embedded text resources: stored over the text threshold.

The model gets the head of the text (``text_preview`` bytes, cut after a line end), a line saying how much
was shown and cut, and a ``resource_link`` to the whole text.
"""

from __future__ import annotations

from typing import Any

from blobstore.models import Artifact
from mcp_resources.proxy.items import Call, Item, Kind
from mcp_resources.proxy.lines import text_cut_line
from mcp_resources.proxy.long_values import StagedPayload
from mcp_resources.proxy.names import uri_leaf, usable_name
from mcp_resources.proxy.rules import ToolRules


def cut_text(text: str, limit: int) -> str:
    """The head of ``text`` in at most ``limit`` UTF-8 bytes, cut after a line end when one is in the second
    half of the window, else at a character boundary."""
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    head = raw[:limit].decode("utf-8", errors="ignore")
    line_end = head.rfind("\n")
    if line_end >= len(head) // 2:
        return head[: line_end + 1]
    return head


def _text_item(block: dict[str, Any], text: str | StagedPayload, kind: Kind, mime: str, name: str) -> Item:
    if isinstance(text, StagedPayload):
        return Item(original=block, kind=kind, payload=text, staged=text, mime_type=mime, name=name)
    return Item(original=block, kind=kind, payload=text, raw=text.encode("utf-8"), mime_type=mime, name=name)


def text_item(block: dict[str, Any], call: Call, index: int) -> Item:
    name = call.payload_name(index, "text/plain", text=True)
    return _text_item(block, block["text"], "text", "text/plain", name)


def resource_text_item(block: dict[str, Any], resource: dict[str, Any], call: Call, index: int) -> Item:
    leaf = uri_leaf(str(resource.get("uri") or ""))
    mime = str(resource.get("mimeType") or "") or "text/plain"
    name = leaf if usable_name(leaf) else call.payload_name(index, mime, text=True)
    return _text_item(block, resource["text"], "resource-text", mime, name)


def text_due(item: Item, rules: ToolRules) -> bool:
    limit = rules.text_preview if rules.mode == "always" else rules.text_threshold
    return item.size > limit


def can_cut(item: Item, rules: ToolRules) -> bool:
    """Whether shrinking the text over the budget can still leave its preview inline."""
    return item.level == 0 and item.size > rules.text_preview


def render_text(
    item: Item, artifact: Artifact, *, link: dict[str, Any], read: str, level: int, preview_limit: int
) -> None:
    if isinstance(item.payload, str):
        whole, lines_total = item.payload, item.payload.count("\n") + 1
    else:
        assert item.staged is not None
        whole, lines_total = item.staged.text_preview_source, item.staged.newlines + 1
    preview = cut_text(whole, preview_limit) if level == 1 else ""
    source = None
    if item.kind == "resource-text":
        uri = (item.original.get("resource") or {}).get("uri")
        source = uri if isinstance(uri, str) and uri else None
    line = text_cut_line(
        artifact,
        kept=len(preview.encode("utf-8")),
        total=item.size,
        lines_kept=preview.count("\n") + (0 if preview.endswith("\n") or not preview else 1),
        lines_total=lines_total,
        source_uri=source,
        read=read,
    )
    text = f"{preview}\n{line}" if preview and not preview.endswith("\n") else preview + line
    item.show([{"type": "text", "text": text}, link], level=level)

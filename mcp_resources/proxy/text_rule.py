"""The offload rule for ``text`` blocks and embedded text resources: stored over the text threshold.

The model gets the head of the text (``text_preview`` bytes, cut after a line end), a line saying how much
was shown and cut, and a ``resource_link`` to the whole text.
"""

from __future__ import annotations

from typing import Any

from blobstore.models import Artifact
from mcp_resources.proxy.items import Call, Item, uri_leaf, usable_name
from mcp_resources.proxy.lines import text_cut_line
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


def text_item(block: dict[str, Any], call: Call, index: int) -> Item:
    text = block["text"]
    return Item(
        original=block,
        kind="text",
        payload=text,
        raw=text.encode("utf-8"),
        mime_type="text/plain",
        name=f"{call.tool}-{index}.txt",
    )


def resource_text_item(block: dict[str, Any], resource: dict[str, Any], call: Call, index: int) -> Item:
    text = resource["text"]
    leaf = uri_leaf(str(resource.get("uri") or ""))
    return Item(
        original=block,
        kind="resource-text",
        payload=text,
        raw=text.encode("utf-8"),
        mime_type=str(resource.get("mimeType") or "") or "text/plain",
        name=leaf if usable_name(leaf) else f"{call.tool}-{index}.txt",
    )


def text_due(item: Item, rules: ToolRules) -> bool:
    assert item.raw is not None
    limit = rules.text_preview if rules.mode == "always" else rules.text_threshold
    return len(item.raw) > limit


def can_cut(item: Item, rules: ToolRules) -> bool:
    """Whether shrinking the text over the budget can still leave its preview inline."""
    assert item.raw is not None
    return item.level == 0 and len(item.raw) > rules.text_preview


def render_text(
    item: Item, artifact: Artifact, *, link: dict[str, Any], read: str, level: int, preview_limit: int
) -> None:
    assert item.payload is not None
    assert item.raw is not None
    preview = cut_text(item.payload, preview_limit) if level == 1 else ""
    source = None
    if item.kind == "resource-text":
        uri = (item.original.get("resource") or {}).get("uri")
        source = uri if isinstance(uri, str) and uri else None
    line = text_cut_line(
        artifact,
        kept=len(preview.encode("utf-8")),
        total=len(item.raw),
        lines_kept=preview.count("\n") + (0 if preview.endswith("\n") or not preview else 1),
        lines_total=item.payload.count("\n") + 1,
        source_uri=source,
        read=read,
    )
    text = f"{preview}\n{line}" if preview and not preview.endswith("\n") else preview + line
    item.show([{"type": "text", "text": text}, link], level=level)

"""One upstream content block on its way through the offload rules, and the call it came from."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Literal

from blobstore.models import Artifact
from mcp_resources.proxy.lines import dropped_payload_line
from mcp_resources.proxy.long_values import LongString, StagedPayload
from mcp_resources.proxy.measure import ENVELOPE_BYTES, decode_base64, measure
from mcp_resources.proxy.names import payload_name
from mcp_resources.proxy.rules import BYTES_PER_TOKEN, ToolRules

logger = logging.getLogger("mcp_resources.proxy")

Kind = Literal["image", "audio", "blob", "text", "resource-text", "other"]
TEXT_KINDS = ("text", "resource-text")
BINARY_KINDS = ("image", "audio", "blob")


@dataclass
class Call:
    tool: str
    arguments_sha256: str
    rules: ToolRules
    file_name: str | None = None
    """The file the call's arguments name (:func:`~mcp_resources.proxy.names.file_name_of`)."""

    def payload_name(self, index: int, mime: str, *, text: bool = False) -> str:
        """What the payload of block ``index`` is stored as (:mod:`~mcp_resources.proxy.names`)."""
        return payload_name(
            tool=self.tool,
            arguments_sha256=self.arguments_sha256,
            file_name=self.file_name,
            index=index,
            mime=mime,
            text=text,
        )


@dataclass
class Item:
    """One upstream content block and what the model currently gets for it."""

    original: dict[str, Any]
    kind: Kind
    payload: str | LongString | None = None
    """The upstream's base64 (or text), to recognise duplicates in structuredContent."""
    raw: bytes | None = None
    staged: StagedPayload | None = None
    """The payload when it was streamed into the store's staging as it arrived (then ``raw`` is None)."""
    mime_type: str = "application/octet-stream"
    name: str = "artifact"
    blocks: list[dict[str, Any]] = field(default_factory=list)
    artifact: Artifact | None = None
    inline_image: dict[str, Any] | None = None
    level: int = 0
    """0: as the upstream sent it; 1: the per-block rule applied; 2: linked with nothing inline."""
    _cost: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if not self.blocks:
            self.blocks = [self.original]

    def cost(self) -> tuple[int, int]:
        """(bytes, tokens) of what the model gets for this block now (without the envelope)."""
        if self._cost is None:
            size, tokens = measure({"content": self.blocks})
            self._cost = (size - ENVELOPE_BYTES, max(0, tokens - ENVELOPE_BYTES // BYTES_PER_TOKEN))
        return self._cost

    def show(
        self, blocks: list[dict[str, Any]], *, level: int, inline_image: dict[str, Any] | None = None
    ) -> None:
        """What the model gets for this block from now on."""
        self.blocks = blocks
        self.level = level
        self.inline_image = inline_image
        self._cost = None

    @property
    def changed(self) -> bool:
        return self.level > 0

    @property
    def has_payload(self) -> bool:
        return self.raw is not None or self.staged is not None

    @property
    def size(self) -> int:
        """Bytes of the payload (decoded)."""
        if self.staged is not None:
            return self.staged.size
        return len(self.raw or b"")

    @property
    def shrinkable(self) -> bool:
        return self.kind != "other" and self.has_payload and self.level < 2


def encoded_item(block: dict[str, Any], call: Call, index: int, kind: Literal["image", "audio"]) -> Item:
    """The item of an ``image`` or ``audio`` block (its base64 in ``data``); ``other`` when that is not
    base64, which no rule offloads."""
    mime = str(block.get("mimeType") or "application/octet-stream")
    name = call.payload_name(index, mime)
    data = block["data"]
    if isinstance(data, StagedPayload):
        if not data.valid:
            return dropped_item(block, call, index, kind, data)
        return Item(original=block, kind=kind, payload=data, staged=data, mime_type=mime, name=name)
    raw = decode_base64(data)
    if raw is None:
        logger.warning("tool %s: %s block %d is not valid base64; left as is", call.tool, kind, index)
        return Item(original=block, kind="other")
    if not raw:
        return Item(original=block, kind="other")  # nothing to store: an empty block passes as it came
    return Item(original=block, kind=kind, payload=data, raw=raw, mime_type=mime, name=name)


def dropped_item(block: dict[str, Any], call: Call, index: int, kind: str, data: StagedPayload) -> Item:
    """A block whose long payload turned out not to be base64: it was not kept, so a line says so."""
    logger.warning("tool %s: %s block %d is not valid base64; replaced by a line", call.tool, kind, index)
    line = dropped_payload_line(kind, index, data.length, data.invalid_at or 0)
    return Item(original=block, kind="other", blocks=[{"type": "text", "text": line}], level=1)

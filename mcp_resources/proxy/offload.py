"""Offload large payloads out of upstream MCP results into the store.

:class:`Offloader` applies the rules of :func:`mcp_resources.content.tool_result_for` to every block of an
upstream ``tools/call`` result (raw JSON, as it came off the wire):

- an ``image`` over the long-edge budget or the inline limit is stored; the model gets it downscaled (through
  the rendition cache) when that fits the inline limit, plus a ``resource_link`` to the original either way;
- ``audio`` and embedded ``resource`` blobs over the inline limit are stored and replaced by a text line and
  a ``resource_link``;
- ``text`` blocks and embedded text resources over the text threshold are stored and replaced by a head
  preview, a line saying how much was cut, and a ``resource_link``;
- base64 in ``structuredContent`` that duplicates an offloaded block gets the smallest replacement that still
  validates against the tool's ``outputSchema`` (:mod:`mcp_resources.proxy.structured`);
- then, while the result is over the host profile's byte or token cap, the largest remaining inline block is
  offloaded further; if nothing is left to shrink, the whole result is stored as JSON and linked.

A result with nothing to offload yields None, so the relay forwards the upstream's exact bytes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import math
import mimetypes
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from mcp.shared.exceptions import MCPError

from blobstore.audit import AuditLog
from blobstore.errors import RangeRequired
from blobstore.links import describe
from blobstore.media import PROBE_BYTES, probe
from blobstore.models import Artifact, Caller
from blobstore.units import human_bytes
from mcp_resources.content import estimate_image_tokens, image_block_for, resource_link_for
from mcp_resources.embed import EmbeddedStore
from mcp_resources.errors import error_data, jsonrpc_code
from mcp_resources.proxy.rules import BYTES_PER_TOKEN, OffloadRules, ToolRules
from mcp_resources.proxy.structured import replace_duplicates
from mcp_resources.uris import ARTIFACT_META_KEY, WINDOW_META_KEY, WINDOW_URI_TEMPLATE, window_uri

logger = logging.getLogger("mcp_resources.proxy")

ENVELOPE_BYTES: Final = 256
"""Room left for the JSON-RPC envelope (``jsonrpc``, ``id``) around the result object."""
SOURCE: Final = "proxy"
MIN_IMAGE_EDGE: Final = 256
"""Over the budget, inline images are halved down to this long edge before they are only linked."""
REPLACEMENT_BYTES: Final = 1536
"""About what a text line and a resource_link cost: blocks this small are not worth offloading."""


def canonical_digest(arguments: Mapping[str, Any] | None) -> str:
    """SHA-256 of the canonical JSON of the arguments: sorted keys, no spaces, UTF-8."""
    text = json.dumps(arguments or {}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def compact_size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def _b64(data: str) -> bytes | None:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


def _image_size(block: Mapping[str, Any]) -> tuple[int, int] | None:
    """Pixel size of an inline image block, from our own _meta or from its header bytes."""
    meta = (block.get("_meta") or {}).get(ARTIFACT_META_KEY) or {}
    width, height = meta.get("width"), meta.get("height")
    if isinstance(width, int) and isinstance(height, int) and width > 0 and height > 0:
        return width, height
    data = block.get("data")
    if not isinstance(data, str):
        return None
    head = _b64(data[: (PROBE_BYTES // 3) * 4])
    facts = probe(str(block.get("mimeType") or "image/png"), head or b"")
    width, height = facts.get("width"), facts.get("height")
    if isinstance(width, int) and isinstance(height, int) and width > 0 and height > 0:
        return width, height
    return None


def measure(result: Mapping[str, Any]) -> tuple[int, int]:
    """(bytes, estimated tokens) of a result as the host receives it.

    Bytes: the compact JSON of the result object plus :data:`ENVELOPE_BYTES`. Tokens: each inline ``image``
    block of ``content`` costs :func:`estimate_image_tokens` of its pixel size (its base64 is not counted
    again); every other byte costs 1/:data:`BYTES_PER_TOKEN` of a token, rounded up.
    """
    total = compact_size(result) + ENVELOPE_BYTES
    image_chars = 0
    image_tokens = 0
    content = result.get("content")
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "image" and isinstance(block.get("data"), str):
            size = _image_size(block)
            if size is not None:
                image_chars += len(block["data"])
                image_tokens += estimate_image_tokens(*size)
    return total, image_tokens + math.ceil((total - image_chars) / BYTES_PER_TOKEN)


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


@dataclass
class _Call:
    tool: str
    arguments_sha256: str
    rules: ToolRules


@dataclass
class _Item:
    """One upstream content block and what the model currently gets for it."""

    original: dict[str, Any]
    kind: str  # "image" | "audio" | "blob" | "text" | "resource-text" | "other"
    payload: str | None = None
    """The upstream's base64 (or text), to recognise duplicates in structuredContent."""
    raw: bytes | None = None
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

    @property
    def changed(self) -> bool:
        return self.level > 0

    @property
    def shrinkable(self) -> bool:
        return self.kind != "other" and self.raw is not None and self.level < 2


class Offloader:
    def __init__(
        self,
        *,
        rules: OffloadRules,
        store: EmbeddedStore,
        caller: Caller,
        upstream_name: str,
        read_tool_name: str | None,
        audit: AuditLog | None = None,
    ) -> None:
        self.rules = rules
        self.store = store
        self.caller = caller
        self.upstream_name = upstream_name
        self.read_tool_name = read_tool_name
        self.audit = audit or store.service.audit

    # -- wording --------------------------------------------------------------------------------------------

    @property
    def max_window(self) -> int:
        return self.store.resources.max_window

    def how_to_read(self, artifact: Artifact) -> str:
        """The sentence every line next to a resource_link ends with."""
        window = self.max_window
        first = window_uri(artifact.id, 0, min(window, max(artifact.size, 1)))
        if self.rules.read_tool_hint and self.read_tool_name:
            return (
                f"read it with the {self.read_tool_name} tool (uri={artifact.uri}, offset, length; at most "
                f"{window} bytes per call) or with resources/read: {first}"
            )
        return f"read it with resources/read in windows of at most {window} bytes: {first}"

    # -- storing --------------------------------------------------------------------------------------------

    async def _store(self, call: _Call, item: _Item) -> Artifact:
        if item.artifact is not None:
            return item.artifact
        assert item.raw is not None
        started = time.monotonic()
        metadata = {
            "source": SOURCE,
            "upstream": self.upstream_name,
            "tool": call.tool,
            "arguments_sha256": call.arguments_sha256,
        }
        artifact = await self.store.put_once(
            item.raw, name=item.name, mime_type=item.mime_type, metadata=metadata, caller=self.caller
        )
        duration = (artifact.media or {}).get("duration_seconds")
        self.audit.record(
            actor=self.caller.actor,
            namespace=self.caller.namespace,
            action="offload",
            result="ok",
            artifact_id=artifact.id,
            size=artifact.size,
            mime_type=artifact.mime_type,
            duration_ms=int((time.monotonic() - started) * 1000),
            extra={
                "upstream": self.upstream_name,
                "tool": call.tool,
                "arguments_sha256": call.arguments_sha256,
                "sha256": artifact.sha256,
                "media_duration_seconds": duration if isinstance(duration, int | float) else None,
            },
        )
        item.artifact = artifact
        return artifact

    def _link(self, artifact: Artifact) -> dict[str, Any]:
        link = resource_link_for(artifact, max_window=self.max_window)
        dumped: dict[str, Any] = link.model_dump(by_alias=True, exclude_none=True, mode="json")
        return dumped

    # -- per-block rules ------------------------------------------------------------------------------------

    def _item(self, block: Any, call: _Call, index: int) -> _Item:
        if not isinstance(block, dict):
            return _Item(original={"value": block}, kind="other", blocks=[block])
        kind = block.get("type")
        stem = f"{call.tool}-{index}"
        if kind in ("image", "audio") and isinstance(block.get("data"), str):
            raw = _b64(block["data"])
            mime = str(block.get("mimeType") or "application/octet-stream")
            if raw is None:
                logger.warning("tool %s: %s block %d is not valid base64; left as is", call.tool, kind, index)
                return _Item(original=block, kind="other")
            return _Item(
                original=block,
                kind=str(kind),
                payload=block["data"],
                raw=raw,
                mime_type=mime,
                name=stem + _extension(mime),
            )
        if kind == "text" and isinstance(block.get("text"), str):
            text = block["text"]
            return _Item(
                original=block,
                kind="text",
                payload=text,
                raw=text.encode("utf-8"),
                mime_type="text/plain",
                name=stem + ".txt",
            )
        resource = block.get("resource")
        if kind == "resource" and isinstance(resource, dict):
            mime = str(resource.get("mimeType") or "")
            uri = str(resource.get("uri") or "")
            leaf = uri.rstrip("/").rsplit("/", 1)[-1] if uri else ""
            if isinstance(resource.get("blob"), str):
                raw = _b64(resource["blob"])
                if raw is None:
                    logger.warning(
                        "tool %s: resource block %d is not valid base64; left as is", call.tool, index
                    )
                    return _Item(original=block, kind="other")
                mime = mime or "application/octet-stream"
                name = leaf if _usable_name(leaf) else stem + _extension(mime)
                return _Item(
                    original=block, kind="blob", payload=resource["blob"], raw=raw, mime_type=mime, name=name
                )
            if isinstance(resource.get("text"), str):
                text = resource["text"]
                mime = mime or "text/plain"
                name = leaf if _usable_name(leaf) else stem + ".txt"
                return _Item(
                    original=block,
                    kind="resource-text",
                    payload=text,
                    raw=text.encode("utf-8"),
                    mime_type=mime,
                    name=name,
                )
        return _Item(original=block, kind="other")

    def _due(self, item: _Item, rules: ToolRules, edge: int) -> bool:
        """Whether the per-block rule offloads this block."""
        assert item.raw is not None
        always = rules.mode == "always"
        if item.kind == "image":
            if always or len(item.raw) > rules.inline_limit:
                return True
            size = _image_size(item.original)
            return size is None or max(size) > edge
        if item.kind in ("audio", "blob"):
            return always or len(item.raw) > rules.inline_limit
        if item.kind in ("text", "resource-text"):
            limit = rules.text_preview if always else rules.text_threshold
            return len(item.raw) > limit
        return False

    async def _apply(self, call: _Call, item: _Item, *, level: int, edge: int) -> None:
        """Render ``item`` at ``level`` (1: per-block rule, 2: nothing inline but a line and a link)."""
        artifact = await self._store(call, item)
        link = self._link(artifact)
        read = self.how_to_read(artifact)
        rules = call.rules
        item.level = level
        item.inline_image = None
        item._cost = None
        if item.kind == "image":
            image = None
            if level == 1:
                block = await image_block_for(
                    artifact,
                    service=self.store.service,
                    caller=self.caller,
                    inline_limit=rules.inline_limit,
                    long_edge=edge,
                    renditions=self.store.renditions,
                    jpeg_fallback=True,
                )
                image = (
                    None if block is None else block.model_dump(by_alias=True, exclude_none=True, mode="json")
                )
            if image is not None:
                size = _image_size(image)
                shown = f"{size[0]}x{size[1]} px" if size else "downscaled"
                tokens = f", about {estimate_image_tokens(*size)} tokens" if size else ""
                line = (
                    f"[image shown inline at {shown}{tokens}; the full-resolution original "
                    f"{describe(artifact)} is stored as {artifact.uri}; {read}]"
                )
                item.inline_image = image
                item.blocks = [{"type": "text", "text": line}, image, link]
            else:
                limit = human_bytes(rules.inline_limit, byte_unit="bytes")
                line = (
                    f"[image {describe(artifact)} is not shown inline (over the {limit} inline limit or the "
                    f"result budget); stored as {artifact.uri}; {read}]"
                )
                item.blocks = [{"type": "text", "text": line}, link]
        elif item.kind in ("audio", "blob"):
            what = "audio" if item.kind == "audio" else "embedded resource"
            source = ""
            if item.kind == "blob":
                uri = (item.original.get("resource") or {}).get("uri")
                source = f" {uri}" if isinstance(uri, str) and uri else ""
            line = f"[{what}{source}: {describe(artifact)} stored as {artifact.uri}; {read}]"
            item.blocks = [{"type": "text", "text": line}, link]
        else:
            assert item.payload is not None
            assert item.raw is not None
            preview = cut_text(item.payload, rules.text_preview) if level == 1 else ""
            kept = len(preview.encode("utf-8"))
            lines_total = item.payload.count("\n") + 1
            lines_kept = preview.count("\n") + (0 if preview.endswith("\n") or not preview else 1)
            source = ""
            if item.kind == "resource-text":
                uri = (item.original.get("resource") or {}).get("uri")
                source = f" of embedded resource {uri}" if isinstance(uri, str) and uri else ""
            line = (
                f"[text{source} cut: showing the first {kept} of {len(item.raw)} bytes ({lines_kept} of "
                f"{lines_total} lines), {len(item.raw) - kept} bytes not shown; the whole text is stored as "
                f"{artifact.uri} ({artifact.mime_type}, {human_bytes(artifact.size, byte_unit='bytes')}); "
                f"{read}]"
            )
            text = f"{preview}\n{line}" if preview and not preview.endswith("\n") else preview + line
            item.blocks = [{"type": "text", "text": text}, link]

    # -- tools/call -----------------------------------------------------------------------------------------

    async def tool_result(
        self,
        *,
        tool: str,
        arguments: Mapping[str, Any] | None,
        output_schema: Mapping[str, Any] | None,
        result: dict[str, Any],
    ) -> dict[str, Any] | None:
        """``result`` is the object under "result" of the upstream's tools/call response. None when nothing
        changes (the relay forwards the upstream's bytes), else the new result object.

        A store that refuses to store (``quota_exceeded``, ``storage_full``, ...) raises the catalogue's
        :class:`~blobstore.errors.BlobstoreError`; map it with :func:`mcp_resources.errors.to_mcp_error`.
        """
        rules = self.rules.for_tool(tool)
        if rules.mode == "never":
            return None
        content = result.get("content")
        if not isinstance(content, list):
            return None
        call = _Call(tool=tool, arguments_sha256=canonical_digest(arguments), rules=rules)
        items = [self._item(block, call, index) for index, block in enumerate(content)]
        images = sum(1 for item in items if item.kind == "image")
        edge = min(rules.image_long_edge, self.rules.profile.image_edge_limit(images))
        for item in items:
            if item.raw is not None and self._due(item, rules, edge):
                await self._apply(call, item, level=1, edge=edge)
        structured = result.get("structuredContent")
        has_structured = "structuredContent" in result
        profile = self.rules.profile
        hopeless_checked = False
        while True:
            candidate = dict(result)
            candidate["content"] = [block for item in items for block in item.blocks]
            if has_structured:
                candidate["structuredContent"] = replace_duplicates(
                    structured, self._duplicates(items), output_schema, tool=tool
                )
            size, tokens = measure(candidate)
            if size <= profile.max_result_bytes and tokens <= profile.max_result_tokens:
                break
            if not hopeless_checked and not has_structured:
                hopeless_checked = True
                if self._hopeless(items, size, tokens):
                    return await self._whole(call, result, output_schema, size, tokens)
            victim = self._largest(items)
            if victim is None:
                return await self._whole(call, result, output_schema, size, tokens)
            await self._shrink(call, victim, edge)
        if not any(item.changed for item in items) and (
            not has_structured or candidate["structuredContent"] is structured
        ):
            return None
        return candidate

    async def _shrink(self, call: _Call, item: _Item, edge: int) -> None:
        """Offload ``item`` one step further: an inline image is halved in size down to
        :data:`MIN_IMAGE_EDGE` before it is only linked; a text is cut to its preview, then only linked."""
        if item.kind == "image":
            shown = item.inline_image if item.level > 0 else item.original
            size = _image_size(shown) if shown is not None else None
            if size is not None and max(size) // 2 >= MIN_IMAGE_EDGE:
                await self._apply(call, item, level=1, edge=max(size) // 2)
                if item.inline_image is not None:
                    return
            await self._apply(call, item, level=2, edge=edge)
            return
        assert item.raw is not None
        texts = ("text", "resource-text")
        cut = item.kind in texts and item.level == 0 and len(item.raw) > call.rules.text_preview
        await self._apply(call, item, level=1 if cut else 2, edge=edge)

    def _duplicates(self, items: list[_Item]) -> dict[str, dict[str, Any]]:
        """Base64 payloads the proxy offloaded, each with its replacements (see structured.py)."""
        found: dict[str, dict[str, Any]] = {}
        for item in items:
            if item.changed and item.artifact is not None and item.kind in ("image", "audio", "blob"):
                assert item.payload is not None
                found[item.payload] = {
                    "uri": item.artifact.uri,
                    "link": self._link(item.artifact),
                    "image": item.inline_image,
                }
        return found

    def _largest(self, items: list[_Item]) -> _Item | None:
        """The inline block that weighs most against the caps, among those whose offloading saves room."""
        profile = self.rules.profile
        best: tuple[float, _Item] | None = None
        for item in items:
            if not item.shrinkable:
                continue
            size, tokens = item.cost()
            if not _worth_linking(size, tokens):
                continue
            weight = max(size / profile.max_result_bytes, tokens / profile.max_result_tokens)
            if best is None or weight > best[0]:
                best = (weight, item)
        return None if best is None else best[1]

    def _hopeless(self, items: list[_Item], size: int, tokens: int) -> bool:
        """Whether even linking every block that can shrink would leave the result over the caps."""
        for item in items:
            if item.shrinkable and _worth_linking(*item.cost()):
                item_size, item_tokens = item.cost()
                size += REPLACEMENT_BYTES - item_size
                tokens += REPLACEMENT_BYTES // BYTES_PER_TOKEN - item_tokens
        profile = self.rules.profile
        return size > profile.max_result_bytes or tokens > profile.max_result_tokens

    async def _whole(
        self,
        call: _Call,
        result: dict[str, Any],
        output_schema: Mapping[str, Any] | None,
        size: int,
        tokens: int,
    ) -> dict[str, Any]:
        """Last resort: store the whole result as JSON and link it."""
        raw = json.dumps(result, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        item = _Item(
            original=result, kind="blob", raw=raw, mime_type="application/json", name=f"{call.tool}.json"
        )
        artifact = await self._store(call, item)
        profile = self.rules.profile
        line = (
            f"[the result of {call.tool} is too large for this host even with its payloads stored "
            f"({size} bytes, about {tokens} tokens; the {profile.name} caps are {profile.max_result_bytes} "
            f"bytes and {profile.max_result_tokens} tokens). The whole result is stored as JSON: "
            f"{describe(artifact)} at {artifact.uri}; {self.how_to_read(artifact)}]"
        )
        logger.warning(
            "tool %s: result still over the %s caps after offloading its blocks; stored whole as %s",
            call.tool,
            profile.name,
            artifact.id,
        )
        answer: dict[str, Any] = {"content": [{"type": "text", "text": line}, self._link(artifact)]}
        if output_schema is not None:
            # A successful result would have to carry structuredContent valid under the schema.
            answer["isError"] = True
        return answer

    # -- resources/read -------------------------------------------------------------------------------------

    async def resource_read(
        self, *, uri: str, params: Mapping[str, Any], result: dict[str, Any]
    ) -> dict[str, Any] | None:
        """For an upstream resources/read result. None = unchanged; else ``{"result": ...}`` or
        ``{"error": {"code": -32602, ...}}`` naming the store URI.

        Every content over the inline limit is stored. Without a window request the answer is the store's
        ``range_required`` error for the (first) stored content. A window request is
        ``params._meta["dev.blobstore/window"] = {"offset": o, "length": n}``; it is answered with that window
        of the stored content, as the store's own window reads are.
        """
        contents = result.get("contents")
        if not isinstance(contents, list):
            return None
        call = _Call(
            tool="resources/read",
            arguments_sha256=canonical_digest({"uri": uri}),
            rules=self.rules.for_tool(""),
        )
        limit = self.rules.inline_limit
        items = [
            _resource_item(content, uri, index)
            for index, content in enumerate(contents)
            if isinstance(content, dict)
        ]
        due = [item for item in items if item.raw is not None and len(item.raw) > limit]
        if not due:
            if compact_size(result) + ENVELOPE_BYTES <= self.rules.profile.max_result_bytes:
                return None
            # Contents each within the inline limit that together overflow the host's cap: store the largest.
            due = [max(items, key=lambda item: len(item.raw or b""))] if items else []
            if not due or due[0].raw is None:
                return None
        stored = [(item.original, await self._store(call, item)) for item in due]
        window = _window_request(params)
        artifact = stored[0][1]
        if window is not None:
            offset, length = window
            target = window_uri(artifact.id, offset, self.max_window if length is None else length)
            try:
                answer = await self.store.resources.read(self.caller, target)
            except MCPError as exc:
                return {"error": exc.error.model_dump(by_alias=True, exclude_none=True, mode="json")}
            return {"result": answer.model_dump(by_alias=True, exclude_none=True, mode="json")}
        max_window = self.max_window
        first = window_uri(artifact.id, 0, min(max_window, artifact.size))
        error = RangeRequired(
            f"{uri} is {artifact.size} bytes, more than the {limit}-byte inline limit; it is stored as "
            f"{artifact.uri}: read it in windows of at most {max_window} bytes, starting with {first}",
            size=artifact.size,
            max_window=max_window,
            inline_limit=limit,
            first=first,
            range_template=WINDOW_URI_TEMPLATE,
        )
        data = error_data(
            error,
            uri=artifact.uri,
            upstreamUri=uri,
            mimeType=artifact.mime_type,
            sha256=artifact.sha256,
            stored=[
                {"uri": str(c.get("uri") or uri), "storeUri": a.uri, "size": a.size, "mimeType": a.mime_type}
                for c, a in stored
            ]
            if len(stored) > 1
            else None,
        )
        return {"error": {"code": jsonrpc_code(error.code), "message": error.message, "data": data}}


def _worth_linking(size: int, tokens: int) -> bool:
    """Whether a block costs more than the line and link that would replace it."""
    return size > REPLACEMENT_BYTES or tokens > REPLACEMENT_BYTES // BYTES_PER_TOKEN


def _resource_item(content: dict[str, Any], uri: str, index: int) -> _Item:
    """One content of a resources/read result as an item to store (raw None when it has no payload)."""
    raw: bytes | None = None
    if isinstance(content.get("blob"), str):
        raw = _b64(content["blob"])
    elif isinstance(content.get("text"), str):
        raw = content["text"].encode("utf-8")
    fallback = "text/plain" if "text" in content else "application/octet-stream"
    mime = str(content.get("mimeType") or fallback)
    leaf = str(content.get("uri") or uri).rstrip("/").rsplit("/", 1)[-1]
    name = leaf if _usable_name(leaf) else f"resource-{index}{_extension(mime)}"
    return _Item(original=content, kind="blob", raw=raw, mime_type=mime, name=name)


def _window_request(params: Mapping[str, Any]) -> tuple[int, int | None] | None:
    meta = params.get("_meta")
    window = meta.get(WINDOW_META_KEY) if isinstance(meta, Mapping) else None
    if not isinstance(window, Mapping):
        return None
    offset, length = window.get("offset", 0), window.get("length")
    if not isinstance(offset, int) or isinstance(offset, bool):
        return None
    if length is not None and (not isinstance(length, int) or isinstance(length, bool)):
        return None
    return offset, length


def _extension(mime: str) -> str:
    return mimetypes.guess_extension(mime) or ".bin"


def _usable_name(name: str) -> bool:
    return 0 < len(name) <= 200 and all(0x20 <= ord(ch) != 0x7F for ch in name)


__all__ = ["Offloader", "canonical_digest", "cut_text", "measure"]

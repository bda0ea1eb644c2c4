"""Offload large payloads out of upstream MCP results into the store.

:class:`Offloader` applies the rules of :func:`mcp_resources.results.content.tool_result_for` to every block
of an upstream ``tools/call`` result (raw JSON, as it came off the wire), one rule per content kind:

- ``image`` (:mod:`~mcp_resources.proxy.image_rule`): over the long-edge budget or the inline limit it is
  stored; the model gets it downscaled when that fits the inline limit, plus a ``resource_link`` either way;
- ``image`` and ``audio`` blocks of a modality the host's model does not take
  (:mod:`~mcp_resources.proxy.modality_rule`): stored, and shown as their text view (OCR text, transcript)
  with a ``resource_link``;
- ``audio`` and embedded ``resource`` blobs (:mod:`~mcp_resources.proxy.media_rule`): over the inline limit
  they are stored and replaced by a text line and a ``resource_link``;
- ``text`` blocks and embedded text resources (:mod:`~mcp_resources.proxy.text_rule`): over the text
  threshold they are stored and replaced by a head preview, a line saying how much was cut, and a link;
- a payload in ``structuredContent`` that duplicates an offloaded block (its base64 or its text) is replaced
  by a reference to the stored artifact that still validates against the tool's ``outputSchema``
  (:mod:`~mcp_resources.proxy.structured`);
- then, while the result is over the host profile's byte or token cap, the largest remaining inline block is
  offloaded further; if nothing is left to shrink, the whole result is stored as JSON and linked.

A result with nothing to offload yields None, so the relay forwards the upstream's exact bytes. The lines the
model reads are worded in :mod:`~mcp_resources.proxy.lines`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final

from blobstore.audit import AuditLog
from blobstore.models import Artifact, Caller
from blobstore.views.engine import views_for
from mcp_resources.embed import EmbeddedStore
from mcp_resources.proxy.image_rule import halved_edge, image_due, render_image
from mcp_resources.proxy.items import BINARY_KINDS, TEXT_KINDS, Call, Item, encoded_item
from mcp_resources.proxy.lines import ReadHint, whole_result_line
from mcp_resources.proxy.long_values import LongString, StagedPayload
from mcp_resources.proxy.measure import ENVELOPE_BYTES, measure
from mcp_resources.proxy.media_rule import blob_item, media_due, render_media
from mcp_resources.proxy.modality_rule import modality_due, render_text_view
from mcp_resources.proxy.names import file_name_of, whole_result_name
from mcp_resources.proxy.resource_read import offload_resource_read
from mcp_resources.proxy.rules import BYTES_PER_TOKEN, OffloadRules
from mcp_resources.proxy.storing import ArtifactWriter, canonical_digest
from mcp_resources.proxy.structured import replace_duplicates
from mcp_resources.proxy.text_rule import can_cut, render_text, resource_text_item, text_due, text_item
from mcp_resources.results.content import NotShown, inline_image_for

logger = logging.getLogger("mcp_resources.proxy")

REPLACEMENT_BYTES: Final = 1536
"""About what a text line and a resource_link cost: blocks this small are not worth offloading."""


def item_for(block: Any, call: Call, index: int) -> Item:
    """The item of one content block, by its kind; ``other`` for what no rule offloads."""
    if not isinstance(block, dict):
        return Item(original={"value": block}, kind="other", blocks=[block])
    kind = block.get("type")
    if (kind == "image" or kind == "audio") and isinstance(block.get("data"), str | StagedPayload):
        return encoded_item(block, call, index, kind)
    if kind == "text" and isinstance(block.get("text"), str | StagedPayload):
        return text_item(block, call, index)
    resource = block.get("resource")
    if kind == "resource" and isinstance(resource, dict):
        if isinstance(resource.get("blob"), str | StagedPayload):
            return blob_item(block, resource, call, index)
        if isinstance(resource.get("text"), str | StagedPayload):
            return resource_text_item(block, resource, call, index)
    return Item(original=block, kind="other")


def _due(item: Item, call: Call, edge: int, rules: OffloadRules) -> bool:
    """Whether the per-block rule offloads this block."""
    if modality_due(item, rules.profile):
        return True
    if item.kind == "image":
        return image_due(item, call.rules, edge)
    if item.kind in ("audio", "blob"):
        return media_due(item, call.rules)
    if item.kind in TEXT_KINDS:
        return text_due(item, call.rules)
    return False


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
        self.writer = ArtifactWriter(
            store=store, caller=caller, upstream_name=upstream_name, audit=audit or store.service.audit
        )
        self.hint = ReadHint(
            read_tool=read_tool_name if rules.read_tool_hint else None,
            max_window=store.resources.max_window,
            max_audio_seconds=store.service.settings.view_max_audio_seconds,
        )

    def _link(self, artifact: Artifact) -> dict[str, Any]:
        return self.writer.link(artifact, description=self.hint.link_description(artifact))

    async def _downscale(self, artifact: Artifact, edge: int, inline_limit: int) -> dict[str, Any] | NotShown:
        block = await inline_image_for(
            artifact,
            service=self.store.service,
            caller=self.caller,
            inline_limit=inline_limit,
            long_edge=edge,
            renditions=self.store.renditions,
            jpeg_fallback=True,
        )
        if isinstance(block, NotShown):
            return block
        return block.model_dump(by_alias=True, exclude_none=True, mode="json")

    async def _apply(self, call: Call, item: Item, *, level: int, edge: int) -> None:
        """Render ``item`` at ``level`` (1: per-block rule, 2: nothing inline but a line and a link)."""
        artifact = await self.writer.store_item(call, item)
        link = self._link(artifact)
        read = self.hint.how_to_read(artifact)
        limit = call.rules.inline_limit
        if modality_due(item, self.rules.profile):
            await render_text_view(
                item,
                artifact,
                views=views_for(self.store.service),
                caller=self.caller,
                link=link,
                read=read,
                level=level,
                profile=self.rules.profile,
                rules=call.rules,
            )
        elif item.kind == "image":

            async def downscale(artifact: Artifact, edge: int) -> dict[str, Any] | NotShown:
                return await self._downscale(artifact, edge, limit)

            await render_image(
                item,
                artifact,
                link=link,
                read=read,
                level=level,
                edge=edge,
                profile=self.rules.profile,
                downscale=downscale,
            )
        elif item.kind in ("audio", "blob"):
            render_media(item, artifact, link=link, read=read, level=level)
        else:
            render_text(
                item, artifact, link=link, read=read, level=level, preview_limit=call.rules.text_preview
            )

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
        call = Call(
            tool=tool,
            arguments_sha256=canonical_digest(arguments),
            rules=rules,
            file_name=file_name_of(arguments),
        )
        items = [item_for(block, call, index) for index, block in enumerate(content)]
        images = sum(1 for item in items if item.kind == "image")
        edge = min(rules.image_long_edge, self.rules.profile.image_edge_limit(images))
        for item in items:
            if item.has_payload and _due(item, call, edge, self.rules):
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

    async def _shrink(self, call: Call, item: Item, edge: int) -> None:
        """Offload ``item`` one step further: an inline image is halved in size down to
        :data:`~mcp_resources.proxy.image_rule.MIN_IMAGE_EDGE` before it is only linked; a text is cut to
        its preview, then only linked."""
        if modality_due(item, self.rules.profile):
            await self._apply(call, item, level=2, edge=edge)
            return
        if item.kind == "image":
            half = halved_edge(item)
            if half is not None:
                await self._apply(call, item, level=1, edge=half)
                if item.inline_image is not None:
                    return
            await self._apply(call, item, level=2, edge=edge)
            return
        cut = item.kind in TEXT_KINDS and can_cut(item, call.rules)
        await self._apply(call, item, level=1 if cut else 2, edge=edge)

    def _duplicates(self, items: list[Item]) -> dict[str | LongString, dict[str, Any]]:
        """Payloads the proxy offloaded (base64 or text), each with its replacements (see structured.py)."""
        found: dict[str | LongString, dict[str, Any]] = {}
        for item in items:
            if item.changed and item.artifact is not None and item.kind in (*BINARY_KINDS, *TEXT_KINDS):
                assert item.payload is not None
                found[item.payload] = {
                    "uri": item.artifact.uri,
                    "link": self._link(item.artifact),
                    "image": item.inline_image,
                }
        return found

    def _largest(self, items: list[Item]) -> Item | None:
        """The inline block that weighs most against the caps, among those whose offloading saves room."""
        profile = self.rules.profile
        best: tuple[float, Item] | None = None
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

    def _hopeless(self, items: list[Item], size: int, tokens: int) -> bool:
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
        call: Call,
        result: dict[str, Any],
        output_schema: Mapping[str, Any] | None,
        size: int,
        tokens: int,
    ) -> dict[str, Any]:
        """Last resort: store the whole result as JSON and link it."""
        name = whole_result_name(tool=call.tool, arguments_sha256=call.arguments_sha256)
        artifact = await self.writer.store_json(call, result, name=name)
        profile = self.rules.profile
        line = whole_result_line(
            artifact,
            tool=call.tool,
            size=size,
            tokens=tokens,
            profile=profile,
            read=self.hint.how_to_read(artifact),
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
        """For an upstream resources/read result (:mod:`~mcp_resources.proxy.resource_read`). None =
        unchanged; else ``{"result": ...}`` or ``{"error": {"code": -32602, ...}}`` naming the store URI.

        A window request is ``params._meta["dev.blobstore/window"] = {"offset": o, "length": n}``; it is
        answered with that window of the stored content, as the store's own window reads are.
        """
        return await offload_resource_read(self.writer, self.rules, uri=uri, params=params, result=result)


def _worth_linking(size: int, tokens: int) -> bool:
    """Whether a block costs more than the line and link that would replace it."""
    return size > REPLACEMENT_BYTES or tokens > REPLACEMENT_BYTES // BYTES_PER_TOKEN


__all__ = ["ENVELOPE_BYTES", "Offloader", "canonical_digest", "item_for", "measure"]

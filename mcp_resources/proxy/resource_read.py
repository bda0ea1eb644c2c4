"""Upstream ``resources/read`` results over the inline limit: stored, and answered as the store answers.

Every content over the inline limit is stored (a text content as a text artifact of its ``mimeType``); the
host gets the store's ``range_required`` error naming the stored copy's ``blobstore://`` URI, or, when the
request asks for a window (``params._meta["dev.blobstore/window"]``), that window of the stored copy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp.shared.exceptions import MCPError

from blobstore.errors import RangeRequired
from blobstore.media import file_extension
from mcp_resources.errors import error_data, jsonrpc_code
from mcp_resources.proxy.items import Call, Item
from mcp_resources.proxy.long_values import StagedPayload
from mcp_resources.proxy.measure import ENVELOPE_BYTES, compact_size, decode_base64
from mcp_resources.proxy.names import uri_leaf, usable_name
from mcp_resources.proxy.rules import OffloadRules
from mcp_resources.proxy.storing import ArtifactWriter, canonical_digest
from mcp_resources.uris import WINDOW_META_KEY, WINDOW_URI_TEMPLATE, window_uri


async def offload_resource_read(
    writer: ArtifactWriter,
    rules: OffloadRules,
    *,
    uri: str,
    params: Mapping[str, Any],
    result: dict[str, Any],
) -> dict[str, Any] | None:
    """None = unchanged; else ``{"result": ...}`` or ``{"error": {"code": -32602, ...}}`` naming the
    store URI."""
    contents = result.get("contents")
    if not isinstance(contents, list):
        return None
    call = Call(
        tool="resources/read", arguments_sha256=canonical_digest({"uri": uri}), rules=rules.for_tool("")
    )
    limit = rules.inline_limit
    items = [
        _resource_item(content, uri, index)
        for index, content in enumerate(contents)
        if isinstance(content, dict)
    ]
    due = [item for item in items if item.has_payload and item.size > limit]
    if not due:
        if compact_size(result) + ENVELOPE_BYTES <= rules.profile.max_result_bytes:
            return None
        # Contents each within the inline limit that together overflow the host's cap: store the largest.
        due = [max(items, key=lambda item: item.size)] if items else []
        if not due or not due[0].has_payload:
            return None
    stored = [(item.original, await writer.store_item(call, item)) for item in due]
    window = _window_request(params)
    artifact = stored[0][1]
    max_window = writer.max_window
    if window is not None:
        offset, length = window
        target = window_uri(artifact.id, offset, max_window if length is None else length)
        try:
            answer = await writer.store.resources.read(writer.caller, target)
        except MCPError as exc:
            return {"error": exc.error.model_dump(by_alias=True, exclude_none=True, mode="json")}
        return {"result": answer.model_dump(by_alias=True, exclude_none=True, mode="json")}
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


def _resource_item(content: dict[str, Any], uri: str, index: int) -> Item:
    """One content of a resources/read result as an item to store (raw None when it has no payload)."""
    raw: bytes | None = None
    staged: StagedPayload | None = None
    payload = content.get("blob", content.get("text"))
    if isinstance(payload, StagedPayload):
        staged = payload if payload.valid else None
    elif isinstance(content.get("blob"), str):
        raw = decode_base64(content["blob"])
    elif isinstance(content.get("text"), str):
        raw = content["text"].encode("utf-8")
    fallback = "text/plain" if "text" in content else "application/octet-stream"
    mime = str(content.get("mimeType") or fallback)
    leaf = uri_leaf(str(content.get("uri") or uri))
    name = leaf if usable_name(leaf) else f"resource-{index}{file_extension(mime)}"
    return Item(original=content, kind="blob", raw=raw, staged=staged, mime_type=mime, name=name)


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

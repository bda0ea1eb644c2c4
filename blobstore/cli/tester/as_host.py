"""``--as-host PROFILE``: what a host's model receives of a result once ``blobstore proxy --host-profile
PROFILE`` stands in front of the server, next to what the server sent.

The result the server sent goes through the proxy's own offloader (:func:`blobstore.cli.proxy.host_offloader`:
the same rules, host profile, store and read-tool name ``blobstore proxy`` uses), once: the tool is called
once, and the payloads the proxy would store are stored, so the links shown are real. Each block the host
receives is then traced to the server block it came from by content: a block passed on unchanged is equal to
it, a ``resource_link`` names the SHA-256 of the payload it stores, a downscaled image names the link's URI
as its source, and the proxy's line names that URI too. Costs are the proxy's own measure
(:func:`mcp_resources.proxy.measure.measure`), the one its budget is kept by.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from blobstore.cli.tester.blocks import (
    TIMES,
    Block,
    count,
    decode_base64,
    describe_block,
    kind_name,
    structured_lines,
)
from blobstore.config import Settings
from blobstore.links import ARTIFACT_META_KEY
from blobstore.units import human_bytes
from mcp_resources.proxy.measure import ENVELOPE_BYTES, measure
from mcp_resources.proxy.rules import BYTES_PER_TOKEN, HostProfile


def payload_digest(block: Mapping[str, Any]) -> str | None:
    """SHA-256 of what the proxy would store of a block: decoded ``data``/``blob``, or the text's UTF-8."""
    kind = block.get("type")
    raw: bytes | None = None
    if kind in ("image", "audio") and isinstance(block.get("data"), str):
        raw = decode_base64(block["data"])[0]
    elif kind == "text" and isinstance(block.get("text"), str):
        raw = block["text"].encode("utf-8")
    elif kind == "resource" and isinstance(block.get("resource"), dict):
        resource = block["resource"]
        if isinstance(resource.get("blob"), str):
            raw = decode_base64(resource["blob"])[0]
        elif isinstance(resource.get("text"), str):
            raw = resource["text"].encode("utf-8")
    return hashlib.sha256(raw).hexdigest() if raw is not None else None


def block_cost(block: Mapping[str, Any]) -> tuple[int, int]:
    """(bytes, tokens) one block costs the host, without the result's envelope."""
    size, tokens = measure({"content": [block]})
    return size - ENVELOPE_BYTES, max(0, tokens - ENVELOPE_BYTES // BYTES_PER_TOKEN)


@dataclass
class Traced:
    """A host block and the server block it came from (None: the proxy's own, e.g. a whole-result link)."""

    how: str
    """``kept``, ``link``, ``downscaled``, ``preview``, ``line`` or ``added``."""
    source: int | None


@dataclass
class HostView:
    profile: HostProfile
    result: dict[str, Any]
    changed: bool
    blocks: list[Block]
    traced: list[Traced]
    fates: list[str]
    """What became of each server block, in words."""
    size: int
    tokens: int
    server_size: int
    server_tokens: int
    costs: list[tuple[int, int]] = field(default_factory=list)

    def heading(self) -> str:
        profile = self.profile
        caps = f"{human_bytes(profile.max_result_bytes)}, {count(profile.max_result_tokens, 'tokens')}"
        received = f"{count(self.size, 'bytes')}, ~{count(self.tokens, 'tokens')}"
        sent = f"{count(self.server_size, 'bytes')}, ~{count(self.server_tokens, 'tokens')}"
        blocks = count(len(self.blocks), "blocks")
        return (
            f"As {profile.name} receives it through blobstore proxy: {blocks}, {received} "
            f"(caps {caps}; the server sent {sent})"
        )

    def lines(self) -> list[str]:
        shown = [self.heading()]
        if not self.changed:
            shown.append("Nothing to offload: the host receives every block as the server sent it.")
            return shown
        for block, traced, (size, tokens) in zip(self.blocks, self.traced, self.costs, strict=True):
            cost = f"{count(size, 'bytes')}, ~{count(tokens, 'tokens')} of the result"
            shown.append(f"{block.line()}; {_words(traced)}; costs {cost}")
            shown.extend(f"  {note}" for note in block.notes)
            if block.text is not None:
                shown.append(block.text)
        if "structuredContent" in self.result:
            shown.extend(structured_lines(self.result["structuredContent"]))
        shown.extend(self.fates)
        return shown

    def as_json(self) -> dict[str, Any]:
        return {
            "profile": self.profile.name,
            "changed": self.changed,
            "bytes": self.size,
            "tokens": self.tokens,
            "serverBytes": self.server_size,
            "serverTokens": self.server_tokens,
            "caps": {"bytes": self.profile.max_result_bytes, "tokens": self.profile.max_result_tokens},
            "content": [
                {
                    **block.as_json(),
                    "costBytes": size,
                    "costTokens": tokens,
                    "from": traced.source,
                    "how": traced.how,
                }
                for block, traced, (size, tokens) in zip(self.blocks, self.traced, self.costs, strict=True)
            ],
            "serverBlocks": self.fates,
            "result": self.result,
        }


def _words(traced: Traced) -> str:
    source = f"server block {traced.source}"
    return {
        "kept": f"{source} as sent",
        "link": f"a link to {source}, stored",
        "downscaled": f"{source} downscaled",
        "preview": f"the head of {source} and the proxy's line",
        "line": f"the proxy's line on {source}",
        "added": "added by the proxy",
    }[traced.how]


def _link_meta(block: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = (block.get("_meta") or {}).get(ARTIFACT_META_KEY)
    return meta if isinstance(meta, dict) else {}


def trace(server: Sequence[Any], host: Sequence[Any]) -> list[Traced]:
    """Where each host block came from (see the module's docstring)."""
    digests: dict[str, int] = {}
    for index, block in enumerate(server):
        if isinstance(block, dict):
            digest = payload_digest(block)
            if digest is not None:
                digests.setdefault(digest, index)
    uris: dict[str, int] = {}
    for block in host:
        if isinstance(block, dict) and block.get("type") == "resource_link":
            source = digests.get(str(_link_meta(block).get("sha256")))
            if source is not None and isinstance(block.get("uri"), str):
                uris[block["uri"]] = source
    claimed: set[int] = set()
    traced: list[Traced] = []
    for block in host:
        found = next((i for i, sent in enumerate(server) if i not in claimed and sent == block), None)
        if found is not None:
            claimed.add(found)
            traced.append(Traced("kept", found))
            continue
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "resource_link" and block.get("uri") in uris:
            traced.append(Traced("link", uris[block["uri"]]))
        elif kind == "image" and _link_meta(block).get("source") in uris:
            traced.append(Traced("downscaled", uris[_link_meta(block)["source"]]))
        elif kind == "text" and (source := _named(str(block.get("text") or ""), uris)) is not None:
            sent = server[source]
            head = sent.get("text") if isinstance(sent, dict) else None
            preview = isinstance(head, str) and bool(head) and block["text"].startswith(head[:64])
            traced.append(Traced("preview" if preview else "line", source))
        else:
            traced.append(Traced("added", None))
    return traced


def _named(text: str, uris: Mapping[str, int]) -> int | None:
    return next((source for uri, source in uris.items() if uri in text), None)


def fates(server: Sequence[Any], traced: Sequence[Traced], host_blocks: Sequence[Block]) -> list[str]:
    """One line per server block: what the host gets of it."""
    lines = []
    for index, sent in enumerate(server):
        kind = kind_name(str(sent.get("type") or "") if isinstance(sent, dict) else "")
        hows = {t.how for t in traced if t.source == index}
        if "kept" in hows:
            fate = "passed on as sent"
        elif "downscaled" in hows:
            shown = next(
                b
                for b, t in zip(host_blocks, traced, strict=True)
                if t.source == index and t.how == "downscaled"
            )
            facts = shown.facts
            size = f" to {facts['width']}{TIMES}{facts['height']} px" if "width" in facts else ""
            fate = f"stored; the host sees it downscaled{size} and a link to the original"
        elif "preview" in hows:
            fate = "stored; the host sees its head, a line saying how much was cut, and a link"
        elif "link" in hows:
            fate = "stored; the host sees a line and a link instead"
        else:
            fate = "not passed on (the host gets nothing of it but the proxy's words)"
        lines.append(f"Server block {index} ({kind}): {fate}")
    return lines


def _content(result: Mapping[str, Any]) -> list[Any]:
    content = result.get("content")
    return content if isinstance(content, list) else []


async def host_view(
    settings: Settings,
    *,
    profile: str,
    tool: str,
    arguments: Mapping[str, Any] | None,
    output_schema: Mapping[str, Any] | None,
    result: Mapping[str, Any],
    upstream_name: str,
    upstream_tools: set[str],
) -> HostView:
    """``result`` (the server's, as JSON) as the host of ``profile`` receives it through the proxy."""
    from blobstore.cli.proxy import host_offloader

    sent = copy.deepcopy(dict(result))
    async with host_offloader(
        settings, profile=profile, upstream_name=upstream_name, upstream_tools=upstream_tools
    ) as (offloader, host):
        changed = await offloader.tool_result(
            tool=tool, arguments=arguments, output_schema=output_schema, result=copy.deepcopy(sent)
        )
    received = changed if changed is not None else sent
    server_content = _content(sent)
    host_content = _content(received)
    blocks = [describe_block(i, b if isinstance(b, dict) else {}) for i, b in enumerate(host_content)]
    traced = trace(server_content, host_content)
    size, tokens = measure(received)
    server_size, server_tokens = measure(sent)
    return HostView(
        profile=host,
        result=received,
        changed=changed is not None,
        blocks=blocks,
        traced=traced,
        fates=fates(server_content, traced, blocks),
        size=size,
        tokens=tokens,
        server_size=server_size,
        server_tokens=server_tokens,
        costs=[block_cost(b if isinstance(b, dict) else {}) for b in host_content],
    )

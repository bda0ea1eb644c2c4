"""The upstream's tools as the proxy knows them, and the store's read tool listed after them.

The proxy lists the upstream's tools once after the handshake (their ``outputSchema`` is what the offload
rules need), again on ``notifications/tools/list_changed`` or for a call naming a tool it has not seen. The
read tool is ``read_artifact``, prefixed with ``blobstore_`` as often as it takes not to clash; the offloader
is built once that name is fixed. Every listing also tells
:class:`~mcp_resources.proxy.argument_handles.ToolArguments` where the tools take artifact URIs, and the host
gets the schemas it rewrote.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from mcp.types import METHOD_NOT_FOUND

from mcp_resources.proxy.argument_handles import ToolArguments
from mcp_resources.proxy.contracts import OffloaderFactory, OwnRequests, Replies, ResultOffloader
from mcp_resources.proxy.ids import Pending, Raw
from mcp_resources.proxy.local import READ_TOOL, LocalStore
from mcp_resources.proxy.rules import MAX_RESULT_SIZE_CHARS_KEY, READ_TOOL_RESULT_CHARS

logger = logging.getLogger("mcp_resources.proxy")

READ_TOOL_PREFIX: Final = "blobstore_"
MAX_PAGES: Final = 100


def read_tool_name(upstream_tools: set[str]) -> str:
    """``read_artifact``, or it with as many ``blobstore_`` prefixes as it takes not to clash."""
    name = READ_TOOL
    while name in upstream_tools:
        name = READ_TOOL_PREFIX + name
    return name


@dataclass
class ToolCatalog:
    local: LocalStore
    replies: Replies
    own_request: OwnRequests
    make_offloader: OffloaderFactory
    upstream_name: Callable[[], str]
    read_tool_enabled: bool
    arguments: ToolArguments
    """Where the tools take artifact URIs (learnt from every listing), and what the host is told of it."""
    read_tool: str | None = field(default=None, init=False)
    offloader: ResultOffloader | None = field(default=None, init=False)
    tools: dict[str, dict[str, Any]] | None = field(default=None, init=False)
    """The upstream's tools by name; None until listed (again)."""
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)

    def forget(self) -> None:
        """The upstream's tools changed: list them again before the next call."""
        self.tools = None

    def tool(self, name: str) -> dict[str, Any]:
        return (self.tools or {}).get(name) or {}

    def needs_tools(self, name: Any) -> bool:
        return self.offloader is None or self.tools is None or name not in self.tools

    def _seen(self, tools: list[dict[str, Any]], *, first_page: bool) -> None:
        if first_page or self.tools is None:
            self.tools = {}
        for tool in tools:
            self.tools[str(tool.get("name"))] = tool
        self.arguments.learn(self.tools)

    def read_tool_entry(self) -> dict[str, Any]:
        entry = self.local.read_tool.model_dump(by_alias=True, mode="json", exclude_none=True)
        entry["name"] = self.read_tool
        # Claude Code writes a long result to a file unless the tool says it may be longer.
        entry["_meta"] = {**entry.get("_meta", {}), MAX_RESULT_SIZE_CHARS_KEY: READ_TOOL_RESULT_CHARS}
        return entry

    async def ensure_read_tool(self, upstream_tools: set[str]) -> None:
        """Fix the read tool's name (once) and build the offloader with it."""
        if self.offloader is not None:
            return
        if self.read_tool_enabled:
            self.read_tool = read_tool_name(upstream_tools)
            if self.read_tool != READ_TOOL:
                logger.warning(
                    "blobstore proxy: the upstream has a tool named %s; the store's read tool is %s",
                    READ_TOOL,
                    self.read_tool,
                )
        self.offloader = self.make_offloader(self.read_tool, self.upstream_name())

    async def fetch(self) -> None:
        async with self._lock:
            tools: list[dict[str, Any]] = []
            cursor: str | None = None
            ok = True
            for _page in range(MAX_PAGES):
                params: dict[str, Any] = {"cursor": cursor} if cursor else {}
                fragment = await self.own_request("tools/list", params)
                result = fragment.get("result")
                if not isinstance(result, dict):
                    ok = False
                    break
                tools.extend(t for t in result.get("tools", []) if isinstance(t, dict))
                cursor = result.get("nextCursor") if isinstance(result.get("nextCursor"), str) else None
                if cursor is None:
                    break
            if ok:
                self._seen(tools, first_page=True)
            elif self.tools is None:
                self.tools = {}
            await self.ensure_read_tool({str(t.get("name")) for t in tools})

    async def prefetch(self) -> None:
        if self.offloader is None:
            await self.fetch()

    async def tools_response(self, pending: Pending, raw: Raw, message: dict[str, Any]) -> None:
        """The host's ``tools/list``: the upstream's page, with the read tool after the last one."""
        result = message.get("result")
        if not isinstance(result, dict):
            error = message.get("error") or {}
            if error.get("code") == METHOD_NOT_FOUND and self.read_tool_enabled:
                await self.ensure_read_tool(set())
                await self.replies.answer(pending.host_id, {"result": {"tools": [self.read_tool_entry()]}})
            else:
                await self.replies.to_host(raw)
            return
        tools = [t for t in result.get("tools", []) if isinstance(t, dict)]
        self._seen(tools, first_page=not pending.params.get("cursor"))
        listed = self.arguments.advertised(result.get("tools", []))
        if not self.read_tool_enabled or isinstance(result.get("nextCursor"), str):
            if listed is None:
                await self.replies.to_host(raw)
            else:
                await self.replies.answer(pending.host_id, {"result": {**result, "tools": listed}})
            return
        names = {str(t.get("name")) for t in (self.tools or {}).values()} | {
            str(t.get("name")) for t in tools
        }
        await self.ensure_read_tool(names)
        page = listed if listed is not None else result.get("tools", [])
        await self.replies.answer(
            pending.host_id, {"result": {**result, "tools": [*page, self.read_tool_entry()]}}
        )

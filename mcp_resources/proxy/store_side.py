"""What the store answers inside the proxy: ``blobstore://`` reads, the read tool, the store's resources
after the upstream's, and the store's capabilities merged into the upstream's handshake.

Resource lists are composite: ``h:<upstream cursor>`` while the upstream has pages, then
``s:<store cursor>`` (the cursors :mod:`mcp_resources.embed` uses).
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import Any, Final

from mcp.types import INVALID_PARAMS, METHOD_NOT_FOUND

from mcp_resources.proxy.contracts import Replies
from mcp_resources.proxy.ids import Pending, Raw
from mcp_resources.proxy.local import READ_TOOL, LocalStore, RequestCancelled
from mcp_resources.transports.compose import HOST_CURSOR, STORE_CURSOR
from mcp_resources.uris import is_store_uri

SERVER_INFO_META_KEY: Final = "io.modelcontextprotocol/serverInfo"
LIST_METHODS: Final = ("resources/list", "resources/templates/list")


def upstream_server_name(result: Mapping[str, Any]) -> str | None:
    """The upstream's own name from its ``initialize`` or ``server/discover`` result."""
    meta = result.get("_meta")
    info = result.get("serverInfo") or (meta.get(SERVER_INFO_META_KEY) if isinstance(meta, dict) else None)
    name = info.get("name") if isinstance(info, dict) else None
    return name if isinstance(name, str) else None


def with_store_capabilities(result: dict[str, Any]) -> dict[str, Any]:
    capabilities = dict(result.get("capabilities") or {})
    if "resources" not in capabilities:
        capabilities["resources"] = {}
    if "tools" not in capabilities:
        capabilities["tools"] = {}
    return {**result, "capabilities": capabilities}


def upstream_cursor(message: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """A list request with the upstream's own cursor in place of the composite ``h:`` one."""
    cursor = params.get("cursor")
    if isinstance(cursor, str) and cursor.startswith(HOST_CURSOR):
        return {**message, "params": {**params, "cursor": cursor[len(HOST_CURSOR) :]}}
    return message


class StoreSide:
    def __init__(self, local: LocalStore, replies: Replies) -> None:
        self.local = local
        self.replies = replies
        local.relay = replies.to_host  # a view's progress reaches the host under the host's token

    def route(
        self,
        message: dict[str, Any],
        method: str,
        params: dict[str, Any],
        host_id: Any,
        read_tool: str | None,
    ) -> Awaitable[None] | None:
        """The work that answers a request the store serves, or None when it goes upstream."""
        if method == "resources/read" and is_store_uri(str(params.get("uri", ""))):
            return self._local(host_id, message)
        if method == "tools/call" and read_tool is not None and params.get("name") == read_tool:
            return self._local(host_id, {**message, "params": {**params, "name": READ_TOOL}})
        if method in LIST_METHODS:
            cursor = params.get("cursor")
            if cursor is None or (isinstance(cursor, str) and cursor.startswith(HOST_CURSOR)):
                return None
            if isinstance(cursor, str) and cursor.startswith(STORE_CURSOR):
                return self._local_page(host_id, message, cursor[len(STORE_CURSOR) :] or None)
            error = {
                "code": INVALID_PARAMS,
                "message": "invalid cursor",
                "data": {"reason": "invalid_request"},
            }
            return self.replies.answer(host_id, {"error": error})
        return None

    async def _local(self, host_id: Any, message: Mapping[str, Any]) -> None:
        try:
            fragment = await self.local.request(message)
        except RequestCancelled:
            return  # a cancelled request is not answered
        await self.replies.answer(host_id, fragment)

    async def cancel(self, host_id: Any) -> bool:
        """Cancel a request the store is answering (False: it is not one of the store's)."""
        return await self.local.cancel(host_id)

    async def _local_page(self, host_id: Any, message: dict[str, Any], cursor: str | None) -> None:
        params = {k: v for k, v in message.get("params", {}).items() if k != "cursor"}
        if cursor is not None:
            params["cursor"] = cursor
        fragment = await self.local.request({**message, "params": params})
        result = fragment.get("result")
        if isinstance(result, dict) and isinstance(result.get("nextCursor"), str):
            fragment = {"result": {**result, "nextCursor": STORE_CURSOR + result["nextCursor"]}}
        await self.replies.answer(host_id, fragment)

    async def initialize(self, params: dict[str, Any]) -> None:
        """The host's ``initialize`` reaches the store's server too, so it answers in the host's era."""
        await self.local.request({"jsonrpc": "2.0", "method": "initialize", "params": params})

    async def list_response(self, pending: Pending, raw: Raw, message: dict[str, Any]) -> None:
        """The upstream's resources (or templates), then the store's after its last page."""
        result = message.get("result")
        key = "resources" if pending.method == "resources/list" else "resourceTemplates"
        request = {"jsonrpc": "2.0", "method": pending.method, "params": pending.params}
        if not isinstance(result, dict):
            error = message.get("error") or {}
            if error.get("code") == METHOD_NOT_FOUND:
                # An upstream without resources: the store's alone.
                await self._local_page(pending.host_id, request, None)
            else:
                await self.replies.to_host(raw)
            return
        if isinstance(result.get("nextCursor"), str):
            await self.replies.answer(
                pending.host_id, {"result": {**result, "nextCursor": HOST_CURSOR + result["nextCursor"]}}
            )
            return
        params = {k: v for k, v in pending.params.items() if k != "cursor"}
        ours = await self.local.request({**request, "params": params})
        theirs = result.get(key)
        theirs_list: list[Any] = theirs if isinstance(theirs, list) else []
        store = ours.get("result") or {}
        merged = {**result, key: [*theirs_list, *store.get(key, [])]}
        merged.pop("nextCursor", None)
        if isinstance(store.get("nextCursor"), str):
            merged["nextCursor"] = STORE_CURSOR + store["nextCursor"]
        await self.replies.answer(pending.host_id, {"result": merged})

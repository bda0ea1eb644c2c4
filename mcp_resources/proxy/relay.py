"""The proxy's relay: JSON-RPC messages between the host and the upstream, at the wire level.

Messages are parsed to dicts only to route them; what passes unchanged is forwarded as the bytes that arrived
(a response only gets its id put back). Ids are remapped in both directions so the proxy's own requests, the
host's and the upstream's never collide:

- host → upstream requests get a proxy id (``"bp-<nonce>-<n>"``); the upstream's response has it put back to
  the host's id by replacing that one token in the raw bytes.
- upstream → host requests (sampling, elicitation, roots) get a proxy id too, and the host's answer goes back
  under the upstream's own id; ``notifications/cancelled`` are translated the same way in both directions.

What the proxy adds: the store's resources after the upstream's (composite cursors ``h:``/``s:`` as
:mod:`mcp_resources.embed` uses), ``blobstore://`` reads and the read tool answered by the in-process store
server (:class:`~mcp_resources.proxy.local.LocalStore`), the store's ``resources`` capability merged into
``initialize``/``server/discover``, and every ``tools/call`` and upstream ``resources/read`` result passed
through the offloader.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from mcp.types import INVALID_PARAMS, METHOD_NOT_FOUND, PROTOCOL_VERSION_META_KEY

from blobstore.errors import UpstreamUnavailable
from mcp_resources.compose import HOST_CURSOR, STORE_CURSOR
from mcp_resources.errors import error_data, jsonrpc_code, to_mcp_error
from mcp_resources.proxy.local import READ_TOOL, LocalStore
from mcp_resources.proxy.transport import Channel, Upstream
from mcp_resources.uris import is_store_uri

logger = logging.getLogger("mcp_resources.proxy")

READ_TOOL_PREFIX: Final = "blobstore_"
SERVER_INFO_META_KEY: Final = "io.modelcontextprotocol/serverInfo"


class ResultOffloader(Protocol):
    async def tool_result(
        self,
        *,
        tool: str,
        arguments: Mapping[str, Any] | None,
        output_schema: Mapping[str, Any] | None,
        result: dict[str, Any],
    ) -> dict[str, Any] | None: ...

    async def resource_read(
        self, *, uri: str, params: Mapping[str, Any], result: dict[str, Any]
    ) -> dict[str, Any] | None: ...


OffloaderFactory = Callable[[str | None, str], ResultOffloader]
"""Builds the offloader once the read tool's name (None: the read tool is off) and the upstream's name are
known."""


def _dumps(message: Any) -> bytes:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()


def _key(ident: Any) -> str:
    """A dict key that keeps 1 and "1" apart (JSON-RPC ids are typed)."""
    return json.dumps(ident)


def read_tool_name(upstream_tools: set[str]) -> str:
    """``read_artifact``, or it with as many ``blobstore_`` prefixes as it takes not to clash."""
    name = READ_TOOL
    while name in upstream_tools:
        name = READ_TOOL_PREFIX + name
    return name


@dataclass
class Pending:
    """A host request forwarded upstream, awaiting its response."""

    host_id: Any
    method: str
    params: dict[str, Any]
    handle: Callable[[Pending, bytes, dict[str, Any]], Awaitable[None]] | None = None
    """How to treat the response; None forwards it as it came."""


@dataclass
class Own:
    """A request the proxy itself sent upstream."""

    future: asyncio.Future[dict[str, Any]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class UpstreamGone(Exception):
    pass


_NOBODY: Final = object()


class Relay:
    def __init__(
        self,
        *,
        host: Channel,
        upstream: Upstream,
        local: LocalStore,
        offloader: OffloaderFactory,
        read_tool: bool = True,
    ) -> None:
        self.host = host
        self.upstream = upstream
        self.local = local
        self._make_offloader = offloader
        self.read_tool_enabled = read_tool
        self.read_tool: str | None = None
        self._offloader: ResultOffloader | None = None
        self._nonce = secrets.token_hex(6)
        self._counter = itertools.count(1)
        self._pending: dict[str, Pending | Own] = {}
        self._host_ids: dict[str, str] = {}  # host id key -> proxy id
        self._server_requests: dict[str, Any] = {}  # proxy id -> upstream's request id
        self._server_ids: dict[str, str] = {}  # upstream id key -> proxy id
        self._tools: dict[str, dict[str, Any]] | None = None  # upstream tool name -> tool
        self._tools_lock = asyncio.Lock()
        self._envelope: dict[str, Any] | None = None  # the host's latest 2026-07-28 _meta envelope
        self._initialized = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._gone = False
        self._host_done = False
        self.upstream_name = upstream.description

    # -- plumbing ---------------------------------------------------------------------------------------

    def _new_id(self) -> str:
        return f"bp-{self._nonce}-{next(self._counter)}"

    def _spawn(self, work: Awaitable[None], *, answering: Any = _NOBODY) -> None:
        """Run ``work`` beside the loops; if it fails, the host request it is ``answering`` gets an error."""

        async def run() -> None:
            try:
                await work
            except UpstreamGone:
                if answering is not _NOBODY:
                    await self._answer(answering, self._gone_error())
            except Exception as exc:
                logger.error("blobstore proxy: failed while relaying a message", exc_info=exc)
                if answering is not _NOBODY:
                    error = to_mcp_error(exc)
                    fragment = {"code": error.code, "message": error.message, "data": error.data}
                    await self._answer(answering, {"error": fragment})

        task = asyncio.create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _to_host(self, message: bytes | Mapping[str, Any]) -> None:
        await self.host.send(message if isinstance(message, bytes) else _dumps(message))

    async def _to_upstream(self, message: bytes | Mapping[str, Any]) -> None:
        if self._gone:
            raise UpstreamGone()
        try:
            await self.upstream.send(message if isinstance(message, bytes) else _dumps(message))
        except (ConnectionError, BrokenPipeError) as exc:
            raise UpstreamGone() from exc

    async def _answer(self, host_id: Any, fragment: Mapping[str, Any]) -> None:
        await self._to_host({"jsonrpc": "2.0", "id": host_id, **fragment})

    async def _error(
        self, host_id: Any, code: int, message: str, data: Mapping[str, Any] | None = None
    ) -> None:
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            error["data"] = dict(data)
        await self._answer(host_id, {"error": error})

    async def _forward_request(self, message: dict[str, Any], pending: Pending) -> None:
        proxy_id = self._new_id()
        self._pending[proxy_id] = pending
        self._host_ids[_key(pending.host_id)] = proxy_id
        try:
            await self._to_upstream({**message, "id": proxy_id})
        except UpstreamGone:
            self._settle(proxy_id)
            await self._answer(pending.host_id, self._gone_error())

    def _settle(self, proxy_id: str) -> Pending | Own | None:
        entry = self._pending.pop(proxy_id, None)
        if isinstance(entry, Pending):
            self._host_ids.pop(_key(entry.host_id), None)
        return entry

    async def _own_request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send the proxy's own request upstream; its ``result``/``error`` fragment."""
        proxy_id = self._new_id()
        own = Own()
        self._pending[proxy_id] = own
        if self._envelope is not None:
            params = {**params, "_meta": {**params.get("_meta", {}), **self._envelope}}
        await self._to_upstream({"jsonrpc": "2.0", "id": proxy_id, "method": method, "params": params})
        return await own.future

    def _gone_error(self) -> dict[str, Any]:
        exc = UpstreamUnavailable(self._gone_message())
        return {"error": {"code": jsonrpc_code(exc.code), "message": exc.message, "data": error_data(exc)}}

    def _gone_message(self) -> str:
        status = self.upstream.exit_status()
        why = ""
        if status is not None:
            why = f" (killed by signal {-status})" if status < 0 else f" (exit status {status})"
        return f"the upstream MCP server {self.upstream_name} is gone{why}"

    # -- main loops -------------------------------------------------------------------------------------

    async def run(self) -> int:
        """Relay until the host closes (0) or the upstream goes away (1); the upstream is started."""
        host_task = asyncio.create_task(self._host_loop())
        upstream_task = asyncio.create_task(self._upstream_loop())
        done, _ = await asyncio.wait({host_task, upstream_task}, return_when=asyncio.FIRST_COMPLETED)
        if upstream_task in done:
            host_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await host_task
            await self.upstream.close()
            return 1
        # The host is done: let the upstream finish what it is answering, then end it.
        await self.upstream.close()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(upstream_task, 10)
        upstream_task.cancel()
        for task in list(self._tasks):
            task.cancel()
        return 0

    async def _host_loop(self) -> None:
        while (raw := await self.host.receive()) is not None:
            try:
                message = json.loads(raw)
            except ValueError:
                await self._error(None, -32700, "Parse error")
                continue
            if not isinstance(message, dict):
                # JSON-RPC batches left MCP in 2025-06-18; no version the proxy relays has them.
                await self._error(None, -32600, "Invalid Request: batches are not supported")
                continue
            await self._from_host(raw, message)
        self._host_done = True

    async def _upstream_loop(self) -> None:
        while (raw := await self.upstream.receive()) is not None:
            try:
                message = json.loads(raw)
            except ValueError:
                logger.warning("proxy: the upstream sent a line that is not JSON; dropped")
                continue
            if isinstance(message, dict):
                await self._from_upstream(raw, message)
        await self._upstream_gone()

    async def _upstream_gone(self) -> None:
        self._gone = True
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.upstream.finished(), 5)
        text = self._gone_message()
        if not self._host_done:
            logger.error("blobstore proxy: %s", text)
        for proxy_id in list(self._pending):
            entry = self._settle(proxy_id)
            if isinstance(entry, Own):
                if not entry.future.done():
                    entry.future.set_result(self._gone_error())
            elif entry is not None:
                with contextlib.suppress(Exception):
                    await self._answer(entry.host_id, self._gone_error())

    async def _safe_upstream(self, message: bytes | Mapping[str, Any]) -> None:
        with contextlib.suppress(UpstreamGone):
            await self._to_upstream(message)

    # -- host → proxy -----------------------------------------------------------------------------------

    async def _from_host(self, raw: bytes, message: dict[str, Any]) -> None:
        method = message.get("method")
        if not isinstance(method, str):
            await self._host_response(message)
            return
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if "id" not in message:
            await self._host_notification(raw, method, params)
            return
        host_id = message["id"]
        meta = params.get("_meta")
        if isinstance(meta, dict) and PROTOCOL_VERSION_META_KEY in meta:
            self._envelope = {k: v for k, v in meta.items() if k.startswith("io.modelcontextprotocol/")}
        if self._gone:
            await self._answer(host_id, self._gone_error())
            return
        handled = await self._route_local(message, method, params, host_id)
        if handled:
            return
        handler = {
            "initialize": self._initialized_response,
            "server/discover": self._discovered_response,
            "tools/list": self._tools_response,
            "tools/call": self._tool_call_response,
            "resources/read": self._resource_read_response,
            "resources/list": self._list_response,
            "resources/templates/list": self._list_response,
        }.get(method)
        pending = Pending(host_id=host_id, method=method, params=params, handle=handler)
        if method == "initialize":
            self._envelope = None
        if method == "resources/list" or method == "resources/templates/list":
            cursor = params.get("cursor")
            if isinstance(cursor, str) and cursor.startswith(HOST_CURSOR):
                message = {**message, "params": {**params, "cursor": cursor[len(HOST_CURSOR) :]}}
        if method == "tools/call" and self._needs_tools(params.get("name")):
            self._spawn(self._call_after_tools(message, pending), answering=host_id)
            return
        await self._forward_request(message, pending)

    async def _route_local(
        self, message: dict[str, Any], method: str, params: dict[str, Any], host_id: Any
    ) -> bool:
        """Answer what the store serves; True when handled."""
        if method == "resources/read" and is_store_uri(str(params.get("uri", ""))):
            self._spawn(self._local(host_id, message), answering=host_id)
            return True
        if method == "tools/call" and self.read_tool is not None and params.get("name") == self.read_tool:
            self._spawn(
                self._local(host_id, {**message, "params": {**params, "name": READ_TOOL}}), answering=host_id
            )
            return True
        if method in ("resources/list", "resources/templates/list"):
            cursor = params.get("cursor")
            if cursor is None or (isinstance(cursor, str) and cursor.startswith(HOST_CURSOR)):
                return False
            if isinstance(cursor, str) and cursor.startswith(STORE_CURSOR):
                page = self._local_page(host_id, message, cursor[len(STORE_CURSOR) :] or None)
                self._spawn(page, answering=host_id)
            else:
                await self._error(host_id, INVALID_PARAMS, "invalid cursor", {"reason": "invalid_request"})
            return True
        return False

    async def _local(self, host_id: Any, message: Mapping[str, Any]) -> None:
        await self._answer(host_id, await self.local.request(message))

    async def _local_page(self, host_id: Any, message: dict[str, Any], cursor: str | None) -> None:
        params = {k: v for k, v in message.get("params", {}).items() if k != "cursor"}
        if cursor is not None:
            params["cursor"] = cursor
        fragment = await self.local.request({**message, "params": params})
        result = fragment.get("result")
        if isinstance(result, dict) and isinstance(result.get("nextCursor"), str):
            fragment = {"result": {**result, "nextCursor": STORE_CURSOR + result["nextCursor"]}}
        await self._answer(host_id, fragment)

    async def _host_notification(self, raw: bytes, method: str, params: dict[str, Any]) -> None:
        if method == "notifications/cancelled":
            proxy_id = self._host_ids.get(_key(params.get("requestId")))
            if proxy_id is None:
                return  # answered already, or answered by the store
            await self._safe_upstream(
                {"jsonrpc": "2.0", "method": method, "params": {**params, "requestId": proxy_id}}
            )
            return
        if method == "notifications/initialized":
            await self._safe_upstream(raw)
            await self.local.notify(
                {"jsonrpc": "2.0", "method": method, "params": params}
                if params
                else {"jsonrpc": "2.0", "method": method}
            )
            self._initialized.set()
            self._spawn(self._prefetch_tools())
            return
        await self._safe_upstream(raw)

    async def _host_response(self, message: dict[str, Any]) -> None:
        """The host answers a request the upstream sent it: put the upstream's id back."""
        proxy_id = message.get("id")
        if not isinstance(proxy_id, str) or proxy_id not in self._server_requests:
            logger.warning("proxy: the host answered a request the proxy does not know; dropped")
            return
        original = self._server_requests.pop(proxy_id)
        self._server_ids.pop(_key(original), None)
        await self._safe_upstream({**message, "id": original})

    # -- upstream → proxy -------------------------------------------------------------------------------

    async def _from_upstream(self, raw: bytes, message: dict[str, Any]) -> None:
        method = message.get("method")
        if isinstance(method, str):
            if "id" in message:
                # A server-to-client request: the host sees a proxy id, answered back under the upstream's.
                proxy_id = self._new_id()
                self._server_requests[proxy_id] = message["id"]
                self._server_ids[_key(message["id"])] = proxy_id
                await self._to_host({**message, "id": proxy_id})
                return
            if method == "notifications/cancelled":
                params = message.get("params") or {}
                known = self._server_ids.pop(_key(params.get("requestId")), None)
                if known is not None:
                    self._server_requests.pop(known, None)
                    await self._to_host({**message, "params": {**params, "requestId": known}})
                    return
            if method == "notifications/tools/list_changed":
                self._tools = None
            await self._to_host(raw)
            return
        ident = message.get("id")
        entry = self._settle(ident) if isinstance(ident, str) else None
        if entry is None or not isinstance(ident, str):
            logger.warning("proxy: the upstream answered a request the proxy did not send; dropped")
            return
        if isinstance(entry, Own):
            if not entry.future.done():
                entry.future.set_result({k: v for k, v in message.items() if k in ("result", "error")})
            return
        if entry.handle is None:
            await self._to_host(self._restore_id(raw, ident, entry.host_id, message))
            return
        restored = self._restore_id(raw, ident, entry.host_id, message)
        self._spawn(entry.handle(entry, restored, message), answering=entry.host_id)

    @staticmethod
    def _restore_id(raw: bytes, proxy_id: str, host_id: Any, message: dict[str, Any]) -> bytes:
        token = _dumps(proxy_id)
        if raw.count(token) == 1:
            return raw.replace(token, _dumps(host_id))
        return _dumps({**message, "id": host_id})

    # -- responses the proxy looks into -----------------------------------------------------------------

    async def _initialized_response(self, pending: Pending, raw: bytes, message: dict[str, Any]) -> None:
        result = message.get("result")
        if not isinstance(result, dict):
            await self._to_host(raw)
            return
        await self.local.request({"jsonrpc": "2.0", "method": "initialize", "params": pending.params})
        await self._answer(pending.host_id, {"result": self._with_store_capabilities(result)})

    async def _discovered_response(self, pending: Pending, raw: bytes, message: dict[str, Any]) -> None:
        result = message.get("result")
        if not isinstance(result, dict):
            await self._to_host(raw)
            return
        self._spawn(self._prefetch_tools())
        await self._answer(pending.host_id, {"result": self._with_store_capabilities(result)})

    def _with_store_capabilities(self, result: dict[str, Any]) -> dict[str, Any]:
        meta = result.get("_meta")
        info = result.get("serverInfo") or (
            meta.get(SERVER_INFO_META_KEY) if isinstance(meta, dict) else None
        )
        if isinstance(info, dict) and isinstance(info.get("name"), str):
            self.upstream_name = info["name"]
        capabilities = dict(result.get("capabilities") or {})
        if "resources" not in capabilities:
            capabilities["resources"] = {}
        if "tools" not in capabilities:
            capabilities["tools"] = {}
        return {**result, "capabilities": capabilities}

    async def _list_response(self, pending: Pending, raw: bytes, message: dict[str, Any]) -> None:
        result = message.get("result")
        key = "resources" if pending.method == "resources/list" else "resourceTemplates"
        request = {"jsonrpc": "2.0", "method": pending.method, "params": pending.params}
        if not isinstance(result, dict):
            error = message.get("error") or {}
            if error.get("code") == METHOD_NOT_FOUND:
                # An upstream without resources: the store's alone.
                await self._local_page(pending.host_id, request, None)
            else:
                await self._to_host(raw)
            return
        if isinstance(result.get("nextCursor"), str):
            await self._answer(
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
        await self._answer(pending.host_id, {"result": merged})

    async def _tools_response(self, pending: Pending, raw: bytes, message: dict[str, Any]) -> None:
        result = message.get("result")
        if not isinstance(result, dict):
            error = message.get("error") or {}
            if error.get("code") == METHOD_NOT_FOUND and self.read_tool_enabled:
                await self._ensure_read_tool(set())
                await self._answer(pending.host_id, {"result": {"tools": [self._read_tool_entry()]}})
            else:
                await self._to_host(raw)
            return
        tools = [t for t in result.get("tools", []) if isinstance(t, dict)]
        if not pending.params.get("cursor"):
            self._seen_tools(tools, first_page=True)
        else:
            self._seen_tools(tools, first_page=False)
        if not self.read_tool_enabled or isinstance(result.get("nextCursor"), str):
            await self._to_host(raw)
            return
        names = {str(t.get("name")) for t in (self._tools or {}).values()} | {
            str(t.get("name")) for t in tools
        }
        await self._ensure_read_tool(names)
        await self._answer(
            pending.host_id,
            {"result": {**result, "tools": [*result.get("tools", []), self._read_tool_entry()]}},
        )

    def _read_tool_entry(self) -> dict[str, Any]:
        entry = self.local.read_tool.model_dump(by_alias=True, mode="json", exclude_none=True)
        entry["name"] = self.read_tool
        return entry

    def _seen_tools(self, tools: list[dict[str, Any]], *, first_page: bool) -> None:
        if first_page or self._tools is None:
            self._tools = {}
        for tool in tools:
            self._tools[str(tool.get("name"))] = tool

    async def _ensure_read_tool(self, upstream_tools: set[str]) -> None:
        """Fix the read tool's name (once) and build the offloader with it."""
        if self._offloader is not None:
            return
        if self.read_tool_enabled:
            self.read_tool = read_tool_name(upstream_tools)
            if self.read_tool != READ_TOOL:
                logger.warning(
                    "blobstore proxy: the upstream has a tool named %s; the store's read tool is %s",
                    READ_TOOL,
                    self.read_tool,
                )
        self._offloader = self._make_offloader(self.read_tool, self.upstream_name)

    def _needs_tools(self, name: Any) -> bool:
        return self._offloader is None or self._tools is None or name not in self._tools

    async def _fetch_tools(self) -> None:
        async with self._tools_lock:
            tools: list[dict[str, Any]] = []
            cursor: str | None = None
            ok = True
            for _page in range(100):
                params: dict[str, Any] = {"cursor": cursor} if cursor else {}
                fragment = await self._own_request("tools/list", params)
                result = fragment.get("result")
                if not isinstance(result, dict):
                    ok = False
                    break
                tools.extend(t for t in result.get("tools", []) if isinstance(t, dict))
                cursor = result.get("nextCursor") if isinstance(result.get("nextCursor"), str) else None
                if cursor is None:
                    break
            if ok:
                self._seen_tools(tools, first_page=True)
            elif self._tools is None:
                self._tools = {}
            await self._ensure_read_tool({str(t.get("name")) for t in tools})

    async def _prefetch_tools(self) -> None:
        if self._offloader is None:
            await self._fetch_tools()

    async def _call_after_tools(self, message: dict[str, Any], pending: Pending) -> None:
        try:
            await self._fetch_tools()
        except UpstreamGone:
            await self._answer(pending.host_id, self._gone_error())
            return
        await self._forward_request(message, pending)

    async def _tool_call_response(self, pending: Pending, raw: bytes, message: dict[str, Any]) -> None:
        result = message.get("result")
        if not isinstance(result, dict) or self._offloader is None:
            await self._to_host(raw)
            return
        name = str(pending.params.get("name"))
        tool = (self._tools or {}).get(name) or {}
        schema = tool.get("outputSchema")
        arguments = pending.params.get("arguments")
        changed = await self._offloader.tool_result(
            tool=name,
            arguments=arguments if isinstance(arguments, dict) else None,
            output_schema=schema if isinstance(schema, dict) else None,
            result=result,
        )
        if changed is None:
            await self._to_host(raw)
        else:
            await self._answer(pending.host_id, {"result": changed})

    async def _resource_read_response(self, pending: Pending, raw: bytes, message: dict[str, Any]) -> None:
        result = message.get("result")
        if not isinstance(result, dict):
            await self._to_host(raw)
            return
        if self._offloader is None:
            await self._fetch_tools()
        assert self._offloader is not None
        fragment = await self._offloader.resource_read(
            uri=str(pending.params.get("uri")), params=pending.params, result=result
        )
        if fragment is None:
            await self._to_host(raw)
        else:
            await self._answer(pending.host_id, fragment)

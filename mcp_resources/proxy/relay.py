"""The proxy's relay: JSON-RPC messages between the host and the upstream, routed at the wire level.

Messages are parsed to dicts only to route them; what passes unchanged is forwarded as the bytes that arrived
(a response only gets its id put back, :mod:`~mcp_resources.proxy.ids`). The relay's parts:

- :class:`~mcp_resources.proxy.ids.IdMap`: proxy ids for requests in both directions;
- :class:`~mcp_resources.proxy.store_side.StoreSide`: what the store answers (``blobstore://`` reads, the read
  tool, its resources after the upstream's, its capabilities merged into the handshake);
- :class:`~mcp_resources.proxy.upstream_tools.ToolCatalog`: the upstream's tools and the read tool's name;
- :class:`~mcp_resources.proxy.argument_handles.ToolArguments`: artifact URIs in the host's ``tools/call``
  arguments, resolved before the call goes upstream;
- the offloader (:mod:`~mcp_resources.proxy.offload`), which every ``tools/call`` and upstream
  ``resources/read`` result passes through.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from mcp.types import CLIENT_INFO_META_KEY, PROTOCOL_VERSION_META_KEY

from blobstore.errors import BlobstoreError, MessageRefused, UpstreamUnavailable
from mcp_resources.errors import error_data, jsonrpc_code, to_mcp_error
from mcp_resources.proxy.argument_handles import Refusal, ToolArguments
from mcp_resources.proxy.contracts import OffloaderFactory, ResultOffloader
from mcp_resources.proxy.host_choice import HostChoice, with_instructions
from mcp_resources.proxy.ids import IdMap, Own, Pending, Raw, restore_id
from mcp_resources.proxy.local import LocalStore
from mcp_resources.proxy.long_values import LongString, MessageSinks, json_parts, json_stream
from mcp_resources.proxy.message_reader import Refused, Streamed
from mcp_resources.proxy.store_side import (
    LIST_METHODS,
    StoreSide,
    upstream_cursor,
    upstream_server_name,
    with_store_capabilities,
)
from mcp_resources.proxy.transport import Channel, Upstream
from mcp_resources.proxy.upstream_tools import ToolCatalog, read_tool_name

__all__ = ["OffloaderFactory", "Relay", "ResultOffloader", "read_tool_name"]

logger = logging.getLogger("mcp_resources.proxy")


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
        arguments: ToolArguments,
        read_tool: bool = True,
        host_choice: HostChoice | None = None,
    ) -> None:
        self.host = host
        self.upstream = upstream
        self.local = local
        self.ids = IdMap()
        self.store_side = StoreSide(local, self)
        self.catalog = ToolCatalog(
            local=local,
            replies=self,
            own_request=self._own_request,
            make_offloader=offloader,
            upstream_name=lambda: self.upstream_name,
            read_tool_enabled=read_tool,
            arguments=arguments,
        )
        self.arguments = arguments
        self.host_choice = host_choice
        """The host profile in force, picked from the client's clientInfo at the handshake unless fixed."""
        self._envelope: dict[str, Any] | None = None  # the host's latest 2026-07-28 _meta envelope
        self._tasks: set[asyncio.Task[None]] = set()
        self._host_lock = asyncio.Lock()
        self._gone = False
        self._host_done = False
        self.upstream_name = upstream.description

    @property
    def read_tool(self) -> str | None:
        return self.catalog.read_tool

    # -- plumbing ---------------------------------------------------------------------------------------

    def _spawn(
        self,
        work: Awaitable[None],
        *,
        answering: Any = _NOBODY,
        then: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Run ``work`` beside the loops; if it fails, the host request it is ``answering`` gets an error.
        ``then`` runs after it either way."""

        async def run() -> None:
            try:
                await self._then(work, then)
            except UpstreamGone:
                if answering is not _NOBODY:
                    await self.answer(answering, self._gone_error())
            except Exception as exc:
                logger.error("blobstore proxy: failed while relaying a message", exc_info=exc)
                if answering is not _NOBODY:
                    error = to_mcp_error(exc)
                    fragment = {"code": error.code, "message": error.message, "data": error.data}
                    await self.answer(answering, {"error": fragment})

        task = asyncio.create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _then(work: Awaitable[None], then: Callable[[], Awaitable[None]] | None) -> None:
        try:
            await work
        finally:
            if then is not None:
                await then()

    async def to_host(self, message: bytes | Mapping[str, Any]) -> None:
        """One message to the host; one whose long strings are held elsewhere is written in pieces, and
        nothing else goes out in between."""
        parts: list[bytes | LongString] = [message] if isinstance(message, bytes) else json_parts(message)
        async with self._host_lock:
            if len(parts) == 1 and isinstance(parts[0], bytes):
                await self.host.send(parts[0])
                return
            async for piece in json_stream(parts):
                await self.host.send_parts([piece])
            await self.host.send_parts([b"\n"])

    async def _to_upstream(self, message: bytes | Mapping[str, Any]) -> None:
        if self._gone:
            raise UpstreamGone()
        try:
            parts: list[bytes | LongString] = [message] if isinstance(message, bytes) else json_parts(message)
            if len(parts) == 1 and isinstance(parts[0], bytes):
                await self.upstream.send(parts[0])
            else:
                assert not isinstance(message, bytes)
                await self.upstream.send_parts(json_stream(parts), message)
        except (ConnectionError, BrokenPipeError) as exc:
            raise UpstreamGone() from exc

    async def answer(self, host_id: Any, fragment: Mapping[str, Any]) -> None:
        await self.to_host({"jsonrpc": "2.0", "id": host_id, **fragment})

    async def _error(self, host_id: Any, code: int, message: str) -> None:
        await self.answer(host_id, {"error": {"code": code, "message": message}})

    async def _forward_request(self, message: dict[str, Any], pending: Pending) -> None:
        proxy_id = self.ids.forward(pending)
        try:
            await self._to_upstream({**message, "id": proxy_id})
        except UpstreamGone:
            self.ids.settle(proxy_id)
            await pending.over()
            await self.answer(pending.host_id, self._gone_error())

    async def _own_request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send the proxy's own request upstream; its ``result``/``error`` fragment."""
        proxy_id, own = self.ids.own()
        if self._envelope is not None:
            params = {**params, "_meta": {**params.get("_meta", {}), **self._envelope}}
        await self._to_upstream({"jsonrpc": "2.0", "id": proxy_id, "method": method, "params": params})
        return await own.future

    def _gone_error(self) -> dict[str, Any]:
        return _catalogue_error(UpstreamUnavailable(self._gone_message()))

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
        while (incoming := await self.host.receive()) is not None:
            if isinstance(incoming, Refused):
                await self._host_refused(incoming)
                continue
            if isinstance(incoming, Streamed):
                # Large arguments: held in temporary files, written to the upstream from there.
                raw: Raw = incoming.message
                message = incoming.message
            else:
                try:
                    message = json.loads(incoming.raw)
                except ValueError:
                    await self._error(None, -32700, "Parse error")
                    continue
                raw = incoming.raw
            if not isinstance(message, dict):
                # JSON-RPC batches left MCP in 2025-06-18; no version the proxy relays has them.
                await self._error(None, -32600, "Invalid Request: batches are not supported")
                continue
            await self._from_host(raw, message)
        self._host_done = True

    async def _host_refused(self, refused: Refused) -> None:
        if refused.reason == "invalid_json":
            await self._error(None, -32700, "Parse error")
        elif refused.reason == "over_cap":
            if isinstance(refused.method, str) and refused.ident is not None:
                await self.answer(refused.ident, _refusal(refused))
            else:
                logger.warning("proxy: %s; dropped", refused.detail)

    async def _upstream_loop(self) -> None:
        while (incoming := await self.upstream.receive()) is not None:
            if isinstance(incoming, Refused):
                await self._refused(incoming)
                continue
            if isinstance(incoming, Streamed):
                message, raw, sinks = incoming.message, None, incoming.sinks
            else:
                try:
                    message = json.loads(incoming.raw)
                except ValueError:
                    logger.warning("proxy: the upstream sent a line that is not JSON; dropped")
                    continue
                raw, sinks = incoming.raw, None
            if not isinstance(message, dict):
                if sinks is not None:
                    await sinks.release()
                continue
            await self._from_upstream(raw, message, sinks)
        await self._upstream_gone()

    async def _refused(self, refused: Refused) -> None:
        """A message the proxy would not take whole: the call it answers, when known, gets the reason."""
        logger.warning("proxy: %s (%d bytes); dropped", refused.detail, refused.size)
        ident = refused.ident
        fragment = _refusal(refused)
        if isinstance(refused.method, str):
            if ident is not None:
                await self._safe_upstream({"jsonrpc": "2.0", "id": ident, **fragment})
            return
        entry = self.ids.settle(ident) if isinstance(ident, str) else None
        if isinstance(entry, Own):
            if not entry.future.done():
                entry.future.set_result(fragment)
        elif entry is not None:
            await entry.over()
            await self.answer(entry.host_id, fragment)

    async def _upstream_gone(self) -> None:
        self._gone = True
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.upstream.finished(), 5)
        text = self._gone_message()
        if not self._host_done:
            logger.error("blobstore proxy: %s", text)
        for proxy_id in self.ids.in_flight():
            entry = self.ids.settle(proxy_id)
            if isinstance(entry, Own):
                if not entry.future.done():
                    entry.future.set_result(self._gone_error())
            elif entry is not None:
                await entry.over()
                with contextlib.suppress(Exception):
                    await self.answer(entry.host_id, self._gone_error())

    async def _safe_upstream(self, message: bytes | Mapping[str, Any]) -> None:
        with contextlib.suppress(UpstreamGone):
            await self._to_upstream(message)

    # -- host → proxy -----------------------------------------------------------------------------------

    async def _from_host(self, raw: Raw, message: dict[str, Any]) -> None:
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
            await self.answer(host_id, self._gone_error())
            return
        local = self.store_side.route(message, method, params, host_id, self.read_tool)
        if local is not None:
            self._spawn(local, answering=host_id)
            return
        handler = {
            "initialize": self._initialized_response,
            "server/discover": self._discovered_response,
            "tools/list": self.catalog.tools_response,
            "tools/call": self._tool_call_response,
            "resources/read": self._resource_read_response,
            "resources/list": self.store_side.list_response,
            "resources/templates/list": self.store_side.list_response,
        }.get(method)
        pending = Pending(host_id=host_id, method=method, params=params, handle=handler)
        if method == "initialize":
            self._envelope = None
        if method in LIST_METHODS:
            message = upstream_cursor(message, params)
        if method == "tools/call" and (
            self.catalog.needs_tools(params.get("name")) or self.arguments.holds_handles(params)
        ):
            self._spawn(self._call_after_tools(message, pending), answering=host_id)
            return
        await self._forward_request(message, pending)

    async def _host_notification(self, raw: Raw, method: str, params: dict[str, Any]) -> None:
        if method == "notifications/cancelled":
            if await self.store_side.cancel(params.get("requestId")):
                return  # the store's own read: its worker is stopped
            proxy_id = self.ids.for_host_id(params.get("requestId"))
            if proxy_id is None:
                return  # answered already
            await self._safe_upstream(
                {"jsonrpc": "2.0", "method": method, "params": {**params, "requestId": proxy_id}}
            )
            cancelled = self.ids.pending(proxy_id)
            if cancelled is not None:
                await cancelled.over()
            return
        if method == "notifications/initialized":
            await self._safe_upstream(raw)
            await self.local.notify(
                {"jsonrpc": "2.0", "method": method, "params": params}
                if params
                else {"jsonrpc": "2.0", "method": method}
            )
            self._spawn(self.catalog.prefetch())
            return
        await self._safe_upstream(raw)

    async def _host_response(self, message: dict[str, Any]) -> None:
        """The host answers a request the upstream sent it: put the upstream's id back."""
        known, original = self.ids.answered_by_host(message.get("id"))
        if not known:
            logger.warning("proxy: the host answered a request the proxy does not know; dropped")
            return
        await self._safe_upstream({**message, "id": original})

    # -- upstream → proxy -------------------------------------------------------------------------------

    async def _from_upstream(
        self, raw: bytes | None, message: dict[str, Any], sinks: MessageSinks | None
    ) -> None:
        """Route one upstream message; ``raw`` is None for one read incrementally (held as ``message``, its
        long strings in ``sinks``, released once it is answered)."""
        try:
            work = await self._route_upstream(raw if raw is not None else message, message)
        except BaseException:
            if sinks is not None:
                await sinks.release()
            raise
        if work is None:
            if sinks is not None:
                await sinks.release()
            return
        handle, host_id = work
        self._spawn(handle, answering=host_id, then=sinks.release if sinks is not None else None)

    async def _route_upstream(self, raw: Raw, message: dict[str, Any]) -> tuple[Awaitable[None], Any] | None:
        """Forward what needs no look inside; the handler to run (and the host id it answers) otherwise."""
        method = message.get("method")
        if isinstance(method, str):
            if "id" in message:
                # A server-to-client request: the host sees a proxy id, answered back under the upstream's.
                await self.to_host({**message, "id": self.ids.from_upstream(message["id"])})
                return None
            if method == "notifications/cancelled":
                params = message.get("params") or {}
                known = self.ids.cancelled_by_upstream(params.get("requestId"))
                if known is not None:
                    await self.to_host({**message, "params": {**params, "requestId": known}})
                    return None
            if method == "notifications/tools/list_changed":
                self.catalog.forget()
            await self.to_host(raw)
            return None
        ident = message.get("id")
        entry = self.ids.settle(ident) if isinstance(ident, str) else None
        if entry is None or not isinstance(ident, str):
            logger.warning("proxy: the upstream answered a request the proxy did not send; dropped")
            return None
        if isinstance(entry, Own):
            if not entry.future.done():
                entry.future.set_result({k: v for k, v in message.items() if k in ("result", "error")})
            return None
        await entry.over()
        restored = restore_id(raw, ident, entry.host_id, message)
        if entry.handle is None:
            await self.to_host(restored)
            return None
        return entry.handle(entry, restored, message), entry.host_id

    # -- responses the proxy looks into -----------------------------------------------------------------

    def _learn_name(self, result: dict[str, Any]) -> None:
        name = upstream_server_name(result)
        if name is not None:
            self.upstream_name = name

    async def _initialized_response(self, pending: Pending, raw: Raw, message: dict[str, Any]) -> None:
        result = message.get("result")
        if not isinstance(result, dict):
            await self.to_host(raw)
            return
        await self.store_side.initialize(pending.params)
        self._learn_name(result)
        answer = with_store_capabilities(result)
        if self.host_choice is not None:
            answer = with_instructions(answer, self.host_choice.pick(pending.params.get("clientInfo")))
        await self.answer(pending.host_id, {"result": answer})

    async def _discovered_response(self, pending: Pending, raw: Raw, message: dict[str, Any]) -> None:
        result = message.get("result")
        if not isinstance(result, dict):
            await self.to_host(raw)
            return
        self._spawn(self.catalog.prefetch())
        self._learn_name(result)
        answer = with_store_capabilities(result)
        if self.host_choice is not None:
            meta = pending.params.get("_meta")
            client = meta.get(CLIENT_INFO_META_KEY) if isinstance(meta, dict) else None
            answer = with_instructions(answer, self.host_choice.pick(client))
        await self.answer(pending.host_id, {"result": answer})

    async def _call_after_tools(self, message: dict[str, Any], pending: Pending) -> None:
        """A call that waits for the tools to be listed, or whose artifact URIs are resolved first."""
        if self.catalog.needs_tools(pending.params.get("name")):
            try:
                await self.catalog.fetch()
            except UpstreamGone:
                await self.answer(pending.host_id, self._gone_error())
                return
            # A 2026-07-28 host may call before any tools/list: only now is the store's read tool named.
            local = self.store_side.route(
                message, "tools/call", pending.params, pending.host_id, self.read_tool
            )
            if local is not None:
                await local
                return
        prepared = await self.arguments.prepared(message)
        if isinstance(prepared, Refusal):
            await self.answer(pending.host_id, prepared.fragment)
            return
        pending.release = prepared.release
        await self._forward_request(prepared.message, pending)

    async def _tool_call_response(self, pending: Pending, raw: Raw, message: dict[str, Any]) -> None:
        result = message.get("result")
        offloader = self.catalog.offloader
        if not isinstance(result, dict) or offloader is None:
            await self.to_host(raw)
            return
        name = str(pending.params.get("name"))
        schema = self.catalog.tool(name).get("outputSchema")
        arguments = pending.params.get("arguments")
        changed = await offloader.tool_result(
            tool=name,
            arguments=arguments if isinstance(arguments, dict) else None,
            output_schema=schema if isinstance(schema, dict) else None,
            result=result,
        )
        if changed is None:
            await self.to_host(raw)
        else:
            await self.answer(pending.host_id, {"result": changed})

    async def _resource_read_response(self, pending: Pending, raw: Raw, message: dict[str, Any]) -> None:
        result = message.get("result")
        if not isinstance(result, dict):
            await self.to_host(raw)
            return
        if self.catalog.offloader is None:
            await self.catalog.fetch()
        offloader = self.catalog.offloader
        assert offloader is not None
        fragment = await offloader.resource_read(
            uri=str(pending.params.get("uri")), params=pending.params, result=result
        )
        if fragment is None:
            await self.to_host(raw)
        else:
            await self.answer(pending.host_id, fragment)


def _catalogue_error(exc: BlobstoreError) -> dict[str, Any]:
    return {"error": {"code": jsonrpc_code(exc.code), "message": exc.message, "data": error_data(exc)}}


def _refusal(refused: Refused) -> dict[str, Any]:
    details: dict[str, Any] = {"cause": refused.reason}
    if refused.max_message_bytes is not None:
        details["max_message_bytes"] = refused.max_message_bytes
    return _catalogue_error(MessageRefused(refused.detail, **details))

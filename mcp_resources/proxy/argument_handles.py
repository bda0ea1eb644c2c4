"""Artifact URIs in the host's ``tools/call`` arguments, resolved before the call goes upstream.

Every ``tools/list`` page the upstream answers passes :meth:`ToolArguments.learn` (each tool's binary sites,
found in its original ``inputSchema`` by :func:`~mcp_resources.binary_schema.binary_sites`) and
:meth:`ToolArguments.advertised` (those schemas rewritten by
:func:`~mcp_resources.binary_schema.advertise_handles`, so the model knows a handle is accepted). A
``tools/call`` whose arguments hold a handle at a remembered site passes :meth:`ToolArguments.prepared`:
:class:`~mcp_resources.handles.ArgumentHandles` replaces the handle with the bytes as the proxy's caller, and
the request goes upstream re-serialised; a handle that cannot be resolved is answered to the host here, as a
tool error (or, for the store's own failures, a JSON-RPC error), and nothing goes upstream.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcp.types import INTERNAL_ERROR

from blobstore.errors import BlobstoreError
from blobstore.models import Caller
from mcp_resources.binary_schema import BinarySite, advertise_handles, binary_sites
from mcp_resources.errors import jsonrpc_code, to_mcp_error, tool_failure
from mcp_resources.handles import ArgumentHandles


@dataclass(frozen=True, slots=True)
class Refusal:
    """The answer to a call whose handles could not be resolved: a ``result`` or ``error`` fragment."""

    fragment: dict[str, Any]


def refusal(exc: BlobstoreError) -> Refusal:
    """A failure the model can act on is the tool's result; the store's own is a protocol error."""
    if jsonrpc_code(exc.code) == INTERNAL_ERROR:
        error = to_mcp_error(exc)
        return Refusal({"error": {"code": error.code, "message": error.message, "data": error.data}})
    failure = tool_failure(exc).model_dump(by_alias=True, mode="json", exclude_none=True)
    return Refusal({"result": failure})


class ToolArguments:
    """The binary sites of the upstream's tools, and the handles in calls to them."""

    def __init__(self, handles: ArgumentHandles, caller: Caller) -> None:
        self.handles = handles
        self.caller = caller
        self._sites: dict[str, list[BinarySite]] = {}

    def learn(self, tools: Mapping[str, Mapping[str, Any]]) -> None:
        """Remember the binary sites of the upstream's tools, from their schemas as the upstream sent them."""
        self._sites = {}
        for name, tool in tools.items():
            schema = tool.get("inputSchema")
            sites = binary_sites(schema if isinstance(schema, dict) else None)
            if sites:
                self._sites[name] = sites

    def sites(self, tool: str) -> list[BinarySite]:
        return self._sites.get(tool, [])

    def advertised(self, tools: list[Any]) -> list[Any] | None:
        """A ``tools/list`` page's tools with each binary property saying it takes a handle; None when no
        tool of the page has one (the page goes to the host as it came)."""
        changed = False
        listed: list[Any] = []
        for tool in tools:
            schema = tool.get("inputSchema") if isinstance(tool, dict) else None
            if isinstance(schema, dict) and binary_sites(schema):
                listed.append({**tool, "inputSchema": advertise_handles(schema)})
                changed = True
            else:
                listed.append(tool)
        return listed if changed else None

    def holds_handles(self, params: Mapping[str, Any]) -> bool:
        """Whether a call's arguments hold an artifact URI at a binary site of its tool."""
        arguments = params.get("arguments")
        sites = self.sites(str(params.get("name")))
        return (
            bool(sites) and isinstance(arguments, dict) and bool(self.handles.handle_slots(arguments, sites))
        )

    async def prepared(self, message: dict[str, Any]) -> dict[str, Any] | Refusal:
        """The ``tools/call`` request to send upstream (the same object when it holds no handle), or the
        answer the host gets instead."""
        params = message.get("params")
        if not isinstance(params, dict) or not self.holds_handles(params):
            return message
        tool = str(params.get("name"))
        try:
            arguments = await self.handles.resolve(
                self.caller, tool=tool, arguments=params.get("arguments"), sites=self.sites(tool)
            )
        except BlobstoreError as exc:
            return refusal(exc)
        return {**message, "params": {**params, "arguments": arguments}}


__all__ = ["Refusal", "ToolArguments", "refusal"]

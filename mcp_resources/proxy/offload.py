"""Offload large payloads out of upstream MCP results into the store."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from blobstore.audit import AuditLog
from blobstore.models import Caller
from mcp_resources.embed import EmbeddedStore
from mcp_resources.proxy.rules import OffloadRules


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
        self.audit = audit

    async def tool_result(
        self,
        *,
        tool: str,
        arguments: Mapping[str, Any] | None,
        output_schema: Mapping[str, Any] | None,
        result: dict[str, Any],
    ) -> dict[str, Any] | None:
        """``result`` is the object under "result" of the upstream's tools/call response. None when nothing
        changes (the relay forwards the upstream's bytes), else the new result object."""
        return None

    async def resource_read(
        self, *, uri: str, params: Mapping[str, Any], result: dict[str, Any]
    ) -> dict[str, Any] | None:
        """For an upstream resources/read result. None = unchanged; else ``{"result": ...}`` or
        ``{"error": {"code": -32602, ...}}`` naming the store URI."""
        return None

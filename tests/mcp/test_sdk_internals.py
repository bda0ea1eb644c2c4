"""The SDK shape the MCP edge relies on is checked when a store server is built, and a change fails loudly."""

from __future__ import annotations

from typing import Any

import pytest
from mcp.server import MCPServer
from mcp.server.connection import Connection
from mcp.server.session import ServerSession

from blobstore.models import Caller
from blobstore.service import ArtifactService
from mcp_resources.embed import embed_store
from mcp_resources.transports.sdk_internals import (
    NEEDED,
    SdkShapeError,
    check_sdk_shape,
    missing_from_sdk,
)
from mcp_resources.transports.server import create_server, fixed_caller

CALLER = Caller(namespace="ns")


def test_the_pinned_sdk_has_everything_the_edge_relies_on() -> None:
    assert missing_from_sdk() == []
    check_sdk_shape()


def test_a_missing_method_fails_the_check_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(Connection, "send_resource_updated")
    with pytest.raises(SdkShapeError, match=r"Connection\.send_resource_updated.*mcp>=2\.3,<2\.4"):
        check_sdk_shape()


def test_a_private_attribute_no_longer_set_fails_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    def init_without_connection(self: ServerSession, *args: Any, **kwargs: Any) -> None:
        del args, kwargs

    monkeypatch.setattr(ServerSession, "__init__", init_without_connection)
    assert missing_from_sdk() == ["mcp.server.session.ServerSession._connection"]


def test_every_reliance_is_checked_by_name() -> None:
    names = {str(needed) for needed in NEEDED}
    assert {
        "mcp.server.session.ServerSession._connection",
        "mcp.server.mcpserver.server.MCPServer._lowlevel_server",
        "mcp.server.mcpserver.server.MCPServer._subscriptions",
    } <= names


async def test_building_or_embedding_a_store_server_fails_at_start_on_a_changed_sdk(
    service: ArtifactService, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delattr(Connection, "has_standalone_channel")
    with pytest.raises(SdkShapeError):
        create_server(service, caller_for=fixed_caller(CALLER))
    with pytest.raises(SdkShapeError):
        embed_store(MCPServer("host"), service, caller=CALLER)

"""Change notifications: ``notifications/resources/updated`` and ``list_changed`` in both protocol eras.

Handshake-era clients subscribe with ``resources/subscribe`` and hear ``list_changed`` on their session;
2026-07-28 clients open a ``subscriptions/listen`` stream. "Nothing arrives" is shown with a barrier, never a
pause: a later change of the client's own namespace is announced, and notifications of one feed go out in the
order the changes happened, so anything that leaked would have arrived before it.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import math
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
import uvicorn
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.server import MCPServer
from mcp.server.subscriptions import InMemorySubscriptionBus
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourcesListChanged, ResourceUpdated, ServerEvent, ToolsListChanged
from mcp.types import (
    EmptyResult,
    ResourceListChangedNotification,
    ResourceUpdatedNotification,
    SubscribeRequest,
    SubscribeRequestParams,
    UnsubscribeRequest,
    UnsubscribeRequestParams,
)

from blobstore.api.app import create_app
from blobstore.cleanup import run_cleanup
from blobstore.config import Settings
from blobstore.events import ArtifactChange, ArtifactEvent
from blobstore.models import Artifact, Caller
from blobstore.runtime import cleanup_parts
from blobstore.service import ArtifactService
from mcp_resources.embed import embed_store
from mcp_resources.transports.http import McpHttpExtension
from mcp_resources.transports.notifications import Feed
from mcp_resources.transports.server import create_server, fixed_caller
from tests.fixtures.server import BLOBSTORE

ALICE = Caller(namespace="alice")
BOB = Caller(namespace="bob")
GUARD_SECONDS = 30
"""Only a hang guard: every wait below ends on the notification it waits for."""


async def store(
    service: ArtifactService, name: str, caller: Caller = ALICE, ttl: int | None = None
) -> Artifact:
    return await service.create_artifact(
        caller, _one(name.encode()), name=name, mime_type="text/plain", ttl_seconds=ttl
    )


async def _one(data: bytes) -> AsyncIterator[bytes]:
    yield data


# -- handshake era (2025-11-25): resources/subscribe and session notifications -------------------------------


@dataclass
class Inbox:
    """The change notifications one handshake-era client received, in order."""

    send: MemoryObjectSendStream[ServerEvent] = field(init=False)
    receive: MemoryObjectReceiveStream[ServerEvent] = field(init=False)

    def __post_init__(self) -> None:
        self.send, self.receive = anyio.create_memory_object_stream[ServerEvent](100)

    async def handle(self, message: Any) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            await self.send.send(ResourceUpdated(message.params.uri))
        elif isinstance(message, ResourceListChangedNotification):
            await self.send.send(ResourcesListChanged())

    async def next(self) -> ServerEvent:
        with anyio.fail_after(GUARD_SECONDS):
            return await self.receive.receive()

    def close(self) -> None:
        self.send.close()
        self.receive.close()


@contextlib.asynccontextmanager
async def legacy_client(service: ArtifactService, caller: Caller) -> AsyncIterator[tuple[Client, Inbox]]:
    inbox = Inbox()
    server = create_server(service, caller_for=fixed_caller(caller))
    try:
        async with Client(server, mode="legacy", message_handler=inbox.handle) as client:
            yield client, inbox
    finally:
        inbox.close()


async def subscribe(client: Client, uri: str) -> None:
    # The wire request itself: the SDK's helper is deprecated because 2026-07-28 replaced it with listen.
    await client.session.send_request(SubscribeRequest(params=SubscribeRequestParams(uri=uri)), EmptyResult)


async def unsubscribe(client: Client, uri: str) -> None:
    await client.session.send_request(
        UnsubscribeRequest(params=UnsubscribeRequestParams(uri=uri)), EmptyResult
    )


async def test_handshake_era_capabilities_offer_subscribe_and_list_changed(service: ArtifactService) -> None:
    async with legacy_client(service, ALICE) as (client, _):
        resources = client.server_capabilities.resources
    assert resources is not None
    assert resources.subscribe is True
    assert resources.list_changed is True


async def test_subscriber_hears_updated_then_list_changed_when_the_artifact_is_deleted(
    service: ArtifactService,
) -> None:
    artifact = await store(service, "doomed.txt")
    async with legacy_client(service, ALICE) as (client, inbox):
        await subscribe(client, artifact.uri)
        await service.delete_artifact(ALICE, artifact.id)
        assert await inbox.next() == ResourceUpdated(artifact.uri)
        assert await inbox.next() == ResourcesListChanged()


async def test_subscriber_hears_updated_when_cleanup_expires_the_artifact(service: ArtifactService) -> None:
    artifact = await store(service, "short-lived.txt", ttl=60)
    window = await store(service, "window.bin", ttl=60)
    window_uri = f"{window.uri}?offset=0&length=4"
    async with legacy_client(service, ALICE) as (client, inbox):
        await subscribe(client, artifact.uri)
        await subscribe(client, window_uri)
        later = service.clock() + timedelta(hours=1)
        service.clock.source = lambda: later
        report = await run_cleanup(cleanup_parts(service), steps=["expire"])
        received = {await inbox.next() for _ in range(3)}
    assert report.items == 2
    # Both updates and a list_changed; the second expiry's list_changed falls in the throttle interval and
    # follows later.
    assert received == {ResourceUpdated(artifact.uri), ResourceUpdated(window_uri), ResourcesListChanged()}


async def test_session_hears_list_changed_for_a_new_artifact_without_subscribing(
    service: ArtifactService,
) -> None:
    async with legacy_client(service, ALICE) as (client, inbox):
        await client.list_resources()
        await store(service, "fresh.txt")
        assert await inbox.next() == ResourcesListChanged()


async def test_another_namespaces_changes_never_reach_a_session(service: ArtifactService) -> None:
    alices = await store(service, "alice.txt")
    bobs = await store(service, "bob.txt", caller=BOB)
    async with (
        legacy_client(service, ALICE) as (alice, alice_inbox),
        legacy_client(service, BOB) as (bob, bob_inbox),
    ):
        await subscribe(alice, alices.uri)
        await subscribe(bob, bobs.uri)
        await store(service, "alice-new.txt")
        await service.delete_artifact(ALICE, alices.id)
        assert await alice_inbox.next() == ResourcesListChanged()
        assert await alice_inbox.next() == ResourceUpdated(alices.uri)
        # Barrier: Bob's own deletion. Had any of Alice's changes reached him, it would have come first.
        await service.delete_artifact(BOB, bobs.id)
        assert await bob_inbox.next() == ResourceUpdated(bobs.uri)


async def test_subscribing_to_a_foreign_artifact_fails_exactly_like_an_unknown_one(
    service: ArtifactService,
) -> None:
    bobs = await store(service, "bob.txt", caller=BOB)
    unknown_uri = bobs.uri[:-4] + ("aaaa" if not bobs.uri.endswith("aaaa") else "bbbb")
    errors = []
    async with legacy_client(service, ALICE) as (client, _):
        for uri in (bobs.uri, unknown_uri):
            with pytest.raises(MCPError) as caught:
                await subscribe(client, uri)
            errors.append((caught.value.error.code, caught.value.error.message, caught.value.error.data))
    (foreign_code, foreign_message, foreign_data), (unknown_code, unknown_message, unknown_data) = errors
    assert (
        (foreign_code, foreign_message) == (unknown_code, unknown_message) == (-32602, "Resource not found")
    )
    assert foreign_data == {"reason": "not_found", "uri": bobs.uri}
    assert unknown_data == {"reason": "not_found", "uri": unknown_uri}


async def test_unsubscribe_stops_updated_notifications(service: ArtifactService) -> None:
    dropped = await store(service, "dropped.txt")
    kept = await store(service, "kept.txt")
    async with legacy_client(service, ALICE) as (client, inbox):
        await subscribe(client, dropped.uri)
        await subscribe(client, kept.uri)
        await unsubscribe(client, dropped.uri)
        await service.delete_artifact(ALICE, dropped.id)
        assert await inbox.next() == ResourcesListChanged()
        # Barrier: the still-subscribed artifact; an update for the dropped one would have come first.
        await service.delete_artifact(ALICE, kept.id)
        assert await inbox.next() == ResourceUpdated(kept.uri)


async def test_a_closed_session_stops_listening_to_the_service(service: ArtifactService) -> None:
    async with legacy_client(service, ALICE) as (client, _):
        await client.list_resources()
        assert service.events.listener_count == 1
    assert service.events.listener_count == 0


# -- 2026-07-28: subscriptions/listen ------------------------------------------------------------------------


async def next_event(events: AsyncIterator[ServerEvent]) -> ServerEvent:
    with anyio.fail_after(GUARD_SECONDS):
        return await anext(events)


async def test_listen_capabilities_offer_subscribe_and_list_changed(service: ArtifactService) -> None:
    async with Client(create_server(service, caller_for=fixed_caller(ALICE))) as client:
        resources = client.server_capabilities.resources
    assert resources is not None
    assert resources.subscribe is True
    assert resources.list_changed is True


async def test_listen_stream_hears_delete_expiry_and_creation(service: ArtifactService) -> None:
    deleted = await store(service, "deleted.txt")
    expiring = await store(service, "expiring.txt", ttl=60)
    server = create_server(service, caller_for=fixed_caller(ALICE))
    async with (
        Client(server) as client,
        client.listen(resource_subscriptions=[deleted.uri, expiring.uri]) as updates,
        client.listen(resources_list_changed=True) as lists,
    ):
        assert updates.honored.resource_subscriptions == [deleted.uri, expiring.uri]
        assert updates.honored.resources_list_changed is None
        await service.delete_artifact(ALICE, deleted.id)
        assert await next_event(updates) == ResourceUpdated(deleted.uri)
        assert await next_event(lists) == ResourcesListChanged()
        later = service.clock() + timedelta(hours=1)
        service.clock.source = lambda: later
        await run_cleanup(cleanup_parts(service), steps=["expire"])
        assert await next_event(updates) == ResourceUpdated(expiring.uri)
        await store(service, "created.txt")
        assert await next_event(lists) == ResourcesListChanged()


async def test_listen_acknowledges_neither_foreign_nor_unknown_artifacts(service: ArtifactService) -> None:
    own = await store(service, "own.txt")
    bobs = await store(service, "bob.txt", caller=BOB)
    gone = await store(service, "gone.txt")
    await service.delete_artifact(ALICE, gone.id)
    async with (
        Client(create_server(service, caller_for=fixed_caller(ALICE))) as client,
        client.listen(
            resource_subscriptions=[bobs.uri, gone.uri, own.uri, "blobstore://artifacts/a_nonexistent"]
        ) as sub,
    ):
        assert sub.honored.resource_subscriptions == [own.uri]


async def test_listen_stream_never_hears_another_namespace(service: ArtifactService) -> None:
    bobs = await store(service, "bob.txt", caller=BOB)
    async with (
        Client(create_server(service, caller_for=fixed_caller(BOB))) as bob,
        bob.listen(resources_list_changed=True, resource_subscriptions=[bobs.uri]) as sub,
    ):
        alices = await store(service, "alice.txt")
        await service.delete_artifact(ALICE, alices.id)
        # Barrier: Bob's own change; a list_changed for Alice's would have come first.
        await service.delete_artifact(BOB, bobs.id)
        assert await next_event(sub) == ResourceUpdated(bobs.uri)
        assert await next_event(sub) == ResourcesListChanged()


async def test_closing_a_listen_stream_stops_its_updates(service: ArtifactService) -> None:
    first = await store(service, "first.txt")
    second = await store(service, "second.txt")
    async with Client(create_server(service, caller_for=fixed_caller(ALICE))) as client:
        async with client.listen(resource_subscriptions=[first.uri]):
            pass
        async with client.listen(resource_subscriptions=[second.uri]) as sub:
            await service.delete_artifact(ALICE, first.id)
            await service.delete_artifact(ALICE, second.id)
            assert await next_event(sub) == ResourceUpdated(second.uri)


# -- the feed's throttle -------------------------------------------------------------------------------------


async def test_a_burst_of_changes_costs_one_list_changed_per_interval() -> None:
    sent: list[ServerEvent] = []
    feed = Feed("alice", list_changed=True, interval=math.inf)
    feed.watch("blobstore://artifacts/a_1", "a_1")

    async def record(event: ServerEvent) -> None:
        sent.append(event)

    async with anyio.create_task_group() as group:
        group.start_soon(feed.run, record)
        feed.offer(ArtifactEvent(ArtifactChange.CREATED, "a_0", "alice"))
        await anyio.wait_all_tasks_blocked()
        for number in range(2, 500):
            feed.offer(ArtifactEvent(ArtifactChange.EXPIRED, f"a_{number}", "alice"))
        feed.offer(ArtifactEvent(ArtifactChange.DELETED, "a_1", "alice"))
        await anyio.wait_all_tasks_blocked()
        feed.close()
    # The first change is announced at once; the next 499 wait for the interval (here: never), while the
    # subscribed artifact's update is not held back.
    assert sent == [ResourcesListChanged(), ResourceUpdated("blobstore://artifacts/a_1")]


# -- real transports -----------------------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def upload_through_tools(client: Client, name: str, data: bytes) -> None:
    begun = await client.call_tool(
        "upload_begin", {"name": name, "mime_type": "text/plain", "size": len(data)}
    )
    assert begun.structured_content is not None
    upload_id = begun.structured_content["upload_id"]
    await client.call_tool("upload_chunk", {"upload_id": upload_id, "index": 0, "data": _b64(data)})
    done = await client.call_tool(
        "upload_commit", {"upload_id": upload_id, "sha256": hashlib.sha256(data).hexdigest()}
    )
    assert not done.is_error


async def test_stdio_session_hears_list_changed_for_its_own_upload(tmp_path: Path) -> None:
    inbox = Inbox()
    params = StdioServerParameters(
        command=BLOBSTORE, args=["mcp", "--data-dir", str(tmp_path), "--namespace", "alice"]
    )
    try:
        async with Client(params, mode="legacy", message_handler=inbox.handle) as client:
            await upload_through_tools(client, "over-stdio.txt", b"hello over stdio\n")
            assert await inbox.next() == ResourcesListChanged()
    finally:
        inbox.close()


@contextlib.asynccontextmanager
async def http_app(service: ArtifactService, settings: Settings) -> AsyncIterator[str]:
    """The HTTP API with the MCP endpoint, in this process (so it shares the service and its events)."""
    app = create_app(settings, service=service, extensions=[McpHttpExtension(settings)])
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    # A socket that already listens: connections wait in its backlog until the app has started.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        async with anyio.create_task_group() as group:
            group.start_soon(functools.partial(server.serve, sockets=[sock]))
            try:
                yield f"http://127.0.0.1:{port}/mcp"
            finally:
                server.should_exit = True


async def test_stateless_http_listen_stream_hears_a_deletion(service: ArtifactService) -> None:
    artifact = await store(service, "over-http.txt", caller=Caller(namespace="default"))
    async with (
        http_app(service, service.settings) as url,
        Client(url) as client,
        client.listen(resource_subscriptions=[artifact.uri], resources_list_changed=True) as sub,
    ):
        await service.delete_artifact(Caller(namespace="default"), artifact.id)
        assert await next_event(sub) == ResourceUpdated(artifact.uri)
        assert await next_event(sub) == ResourcesListChanged()


async def test_stateless_http_handshake_era_offers_no_subscriptions(service: ArtifactService) -> None:
    async with (
        http_app(service, service.settings) as url,
        Client(streamable_http_client(url), mode="legacy") as client,
    ):
        resources = client.server_capabilities.resources
    assert resources is not None
    assert not resources.subscribe
    assert not resources.list_changed


# -- embedded in a tool server ------------------------------------------------------------------------------


async def test_a_tool_server_embedding_the_store_relays_its_notifications_in_both_eras(
    service: ArtifactService,
) -> None:
    first = await store(service, "first.txt")
    second = await store(service, "second.txt")
    host = MCPServer("host")
    embed_store(host, service, caller=ALICE)
    inbox = Inbox()
    try:
        async with Client(host, mode="legacy", message_handler=inbox.handle) as legacy:
            await subscribe(legacy, first.uri)
            await service.delete_artifact(ALICE, first.id)
            assert await inbox.next() == ResourceUpdated(first.uri)
    finally:
        inbox.close()
    async with Client(host) as modern, modern.listen(resource_subscriptions=[second.uri]) as sub:
        await service.delete_artifact(ALICE, second.id)
        assert await next_event(sub) == ResourceUpdated(second.uri)


async def test_a_tool_server_passing_its_bus_relays_its_own_tool_changes_beside_the_stores(
    service: ArtifactService,
) -> None:
    artifact = await store(service, "watched.txt")
    bus = InMemorySubscriptionBus()
    host = MCPServer("host", subscriptions=bus)
    embed_store(host, service, caller=ALICE, subscriptions=bus)
    async with (
        Client(host) as client,
        client.listen(tools_list_changed=True, resource_subscriptions=[artifact.uri]) as sub,
    ):
        assert sub.honored.tools_list_changed
        await bus.publish(ToolsListChanged())
        assert await next_event(sub) == ToolsListChanged()
        await service.delete_artifact(ALICE, artifact.id)
        assert await next_event(sub) == ResourceUpdated(artifact.uri)

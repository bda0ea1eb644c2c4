"""Push artifact changes to MCP clients: ``notifications/resources/updated`` and ``list_changed``.

The service announces every committed change on ``service.events`` (created, deleted, expired). Each
client that can receive notifications gets a :class:`Feed`: its namespace, the URIs it subscribed to and
whether it wants ``list_changed``. An event reaches only the feeds of its own namespace. A feed coalesces what
it has not sent yet and sends ``list_changed`` at most once per interval (0.5 s), so a bulk cleanup expiring
thousands of artifacts costs a client a handful of notifications; a change inside the interval is announced
when it ends, never dropped.

How a client gets a feed depends on the protocol era:

* 2025-11-25 and earlier (handshake): every session with a standing channel (stdio, in-memory, stateful
  streamable HTTP) gets a feed with ``list_changed`` when it first calls in; ``resources/subscribe`` adds URIs
  to it. A stateless HTTP request has no channel to push on, so it gets no feed.
* 2026-07-28: ``subscriptions/listen`` opens one feed per stream with exactly the filter the client asked
  for; the stream is the request's own response, so this works on stateless HTTP too.

Subscribing to an unknown, expired or foreign artifact is refused (handshake era: error "Resource not found",
the same answer ``resources/read`` gives) or left out of the acknowledged filter (2026-07-28), identically
in all three cases, so a subscription never tells whether another namespace's artifact exists. Events are
heard in this process only (see :mod:`blobstore.events`).
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final

import anyio
from anyio.abc import TaskGroup
from mcp.server import Server, ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.server.subscriptions import SubscriptionBus
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import (
    SUBSCRIPTION_ID_META_KEY,
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
    event_to_notification,
)
from mcp.types import (
    INVALID_REQUEST,
    EmptyResult,
    SubscribeRequestParams,
    SubscriptionFilter,
    SubscriptionsAcknowledgedNotification,
    SubscriptionsAcknowledgedNotificationParams,
    SubscriptionsListenRequestParams,
    SubscriptionsListenResult,
    UnsubscribeRequestParams,
)
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from blobstore.auth import require_scope
from blobstore.errors import BlobstoreError, LimitExceeded, NotFound
from blobstore.events import ArtifactChange, ArtifactEvent
from blobstore.models import Caller, Scope
from blobstore.service import ArtifactService
from mcp_resources.errors import mcp_handler
from mcp_resources.reading.resources import CallerResolver
from mcp_resources.transports.compose import by_scheme
from mcp_resources.transports.sdk_internals import connection_of
from mcp_resources.uris import is_store_uri, parse_store_uri

logger = logging.getLogger("mcp_resources.notifications")

LIST_CHANGED_INTERVAL: Final = 0.5
"""Seconds between two ``list_changed`` notifications to one client, however many changes happen."""
MAX_SUBSCRIPTIONS: Final = 1000
"""URIs one session (or one listen stream) may watch: each costs a lookup, and memory while it lives."""
_FEED_STATE_KEY: Final = "blobstore.feed"
_GONE: Final = frozenset({ArtifactChange.DELETED, ArtifactChange.EXPIRED})

Send = Callable[[ServerEvent], Awaitable[None]]


class Feed:
    """What one client waits for, and what it has not been sent yet.

    The queue is ordered and deduplicated (one entry per URI, one ``list_changed``), so notifications go out
    in the order the changes happened, a client that reads slowly holds up no memory beyond its
    subscriptions, and a publisher never waits for a client: :meth:`offer` only records.
    """

    def __init__(
        self,
        namespace: str,
        *,
        list_changed: bool,
        interval: float = LIST_CHANGED_INTERVAL,
        host_kinds: frozenset[type[ServerEvent]] = frozenset(),
    ) -> None:
        self.namespace = namespace
        self.list_changed = list_changed
        self.interval = interval
        self.host_kinds = host_kinds
        self.uris: dict[str, str | None] = {}
        """Subscribed URI -> the artifact id it names (None for a URI of the server that embeds the store)."""
        self._queue: dict[ServerEvent, None] = {}
        self._deferred_list = False
        self._wake = anyio.Event()
        self.closed = False

    def watch(self, uri: str, artifact_id: str | None) -> None:
        if uri not in self.uris and len(self.uris) >= MAX_SUBSCRIPTIONS:
            raise LimitExceeded(f"at most {MAX_SUBSCRIPTIONS} resource subscriptions per session")
        self.uris[uri] = artifact_id

    def unwatch(self, uri: str) -> None:
        self.uris.pop(uri, None)

    def _put(self, event: ServerEvent) -> None:
        self._queue[event] = None
        self._wake.set()

    def offer(self, event: ArtifactEvent) -> None:
        if self.closed or event.namespace != self.namespace:
            return
        if event.change in _GONE:
            for uri, artifact_id in list(self.uris.items()):
                if artifact_id == event.artifact_id:
                    self._put(ResourceUpdated(uri))
        if self.list_changed:
            self._put(ResourcesListChanged())

    def offer_host(self, event: ServerEvent) -> None:
        """An event of the server that embeds the store (its own tools, prompts and resources)."""
        if self.closed:
            return
        if isinstance(event, ResourcesListChanged):
            wanted = self.list_changed
        elif isinstance(event, ResourceUpdated):
            wanted = event.uri in self.uris and self.uris[event.uri] is None
        else:
            wanted = type(event) in self.host_kinds
        if wanted:
            self._put(event)

    def close(self) -> None:
        self.closed = True
        self._wake.set()

    async def run(self, send: Send) -> None:
        """Send what is queued until the feed is closed, ``list_changed`` at most once per interval (a
        throttled one is sent when the interval ends).
        """
        last_list = -math.inf
        while not self.closed:
            while self._queue and not self.closed:
                event = next(iter(self._queue))
                del self._queue[event]
                if not isinstance(event, ResourcesListChanged):
                    await send(event)
                elif anyio.current_time() - last_list >= self.interval:
                    self._deferred_list = False
                    last_list = anyio.current_time()
                    await send(event)
                else:
                    self._deferred_list = True
            wait = math.inf
            if self._deferred_list:
                wait = last_list + self.interval - anyio.current_time()
                if wait <= 0:
                    self._deferred_list = False
                    last_list = anyio.current_time()
                    await send(ResourcesListChanged())
                    continue
            if self.closed or self._queue:
                continue
            # No await since the checks above, so an offer() from now on sets this new event.
            self._wake = anyio.Event()
            with anyio.move_on_after(wait):
                await self._wake.wait()


class StoreNotifications:
    """Routes the service's artifact events to the feeds of connected clients, in both protocol eras."""

    def __init__(
        self,
        service: ArtifactService,
        caller_for: CallerResolver,
        *,
        interval: float = LIST_CHANGED_INTERVAL,
        host_bus: SubscriptionBus | None = None,
    ) -> None:
        self.service = service
        self.caller_for = caller_for
        self.interval = interval
        self.host_bus = host_bus
        self._feeds: list[Feed] = []
        self._unsubscribe_events: Callable[[], None] | None = None
        self._groups: list[TaskGroup] = []

    # -- routing ---------------------------------------------------------------------------------------------

    def _attach(self, feed: Feed) -> Callable[[], None]:
        self._feeds.append(feed)
        if self._unsubscribe_events is None:
            self._unsubscribe_events = self.service.events.subscribe(self._on_event)

        def detach() -> None:
            feed.close()
            if feed in self._feeds:
                self._feeds.remove(feed)
            if not self._feeds and self._unsubscribe_events is not None:
                self._unsubscribe_events()
                self._unsubscribe_events = None

        return detach

    async def _on_event(self, event: ArtifactEvent) -> None:
        for feed in list(self._feeds):
            if feed.namespace == event.namespace:
                feed.offer(event)

    def _caller(self, ctx: ServerRequestContext[Any, Any]) -> Caller:
        return require_scope(self.caller_for(ctx), Scope.READ)

    # -- lifespan: where handshake-era sessions' feeds run ---------------------------------------------------

    def wrap_lifespan(
        self, inner: Callable[[Server[Any]], contextlib.AbstractAsyncContextManager[Any]]
    ) -> Callable[[Server[Any]], contextlib.AbstractAsyncContextManager[Any]]:
        @contextlib.asynccontextmanager
        async def lifespan(server: Server[Any]) -> AsyncIterator[Any]:
            async with inner(server) as state, anyio.create_task_group() as group:
                self._groups.append(group)
                try:
                    yield state
                finally:
                    self._groups.remove(group)
                    if not self._groups:
                        # Shutting down: listen streams end gracefully, with their result, not by a dropped
                        # connection.
                        self.close()
                    group.cancel_scope.cancel()

        return lifespan

    def _start(self, feed: Feed, send: Send) -> bool:
        if not self._groups:
            return False
        self._groups[-1].start_soon(self._pump, feed, send)
        return True

    async def _pump(self, feed: Feed, send: Send) -> None:
        try:
            await feed.run(send)
        except anyio.get_cancelled_exc_class():
            # The server may be entered more than once at a time (several in-process clients): when the
            # lifespan this pump ran in ends before the session does, move it to one still running.
            if not feed.closed and self._groups:
                self._groups[-1].start_soon(self._pump, feed, send)
            raise

    # -- handshake era: one feed per session -----------------------------------------------------------------

    def _session_feed(self, ctx: ServerRequestContext[Any, Any], caller: Caller) -> Feed | None:
        """The feed of ``ctx``'s session, created on first use; None without a standing channel."""
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return None
        # The session's feed lives as long as its connection does.
        connection = connection_of(ctx)
        if not connection.has_standalone_channel:
            return None
        feed = connection.state.get(_FEED_STATE_KEY)
        if isinstance(feed, Feed):
            return feed
        feed = Feed(caller.namespace, list_changed=True, interval=self.interval)

        async def send(event: ServerEvent) -> None:
            # Nothing but pings and logs may precede the client's notifications/initialized; a client that
            # lists after initializing sees those changes anyway.
            if not connection.initialized.is_set():
                return
            if isinstance(event, ResourceUpdated):
                await connection.send_resource_updated(event.uri)
            elif isinstance(event, ResourcesListChanged):
                await connection.send_resource_list_changed()

        if not self._start(feed, send):
            logger.warning("no running server lifespan: this session gets no change notifications")
            return None
        connection.state[_FEED_STATE_KEY] = feed
        connection.exit_stack.callback(self._attach(feed))
        return feed

    async def track_sessions(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Middleware: give every handshake-era session with a standing channel its feed on its first request,
        so it hears ``list_changed`` without having subscribed to anything.
        """
        if ctx.request_id is not None:
            try:
                caller = self._caller(ctx)
            except Exception:
                # No feed for a caller who may not read, or who cannot be told; the request's own handler
                # reports why, through the one error mapping.
                caller = None
            if caller is not None:
                self._session_feed(ctx, caller)
        return await call_next(ctx)

    @mcp_handler
    async def subscribe(
        self, ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams
    ) -> EmptyResult:
        caller = self._caller(ctx)
        ref = parse_store_uri(params.uri)
        if ref is None:
            raise NotFound()
        # Unknown, expired and foreign artifacts are all "not found": the answer reveals nothing.
        await self.service.get_artifact(caller, ref.artifact_id)
        feed = self._session_feed(ctx, caller)
        if feed is not None:
            if feed.namespace != caller.namespace:
                raise NotFound()
            feed.watch(params.uri, ref.artifact_id)
        return EmptyResult()

    @mcp_handler
    async def unsubscribe(
        self, ctx: ServerRequestContext[Any, Any], params: UnsubscribeRequestParams
    ) -> EmptyResult:
        feed = connection_of(ctx).state.get(_FEED_STATE_KEY)
        if isinstance(feed, Feed):
            feed.unwatch(params.uri)
        return EmptyResult()

    # -- 2026-07-28: one feed per subscriptions/listen stream ------------------------------------------------

    async def _honored(
        self, caller: Caller, requested: SubscriptionFilter
    ) -> tuple[SubscriptionFilter, Feed]:
        uris = list(dict.fromkeys(requested.resource_subscriptions or ()))
        if len(uris) > MAX_SUBSCRIPTIONS:
            raise LimitExceeded(f"at most {MAX_SUBSCRIPTIONS} resource subscriptions per stream")
        host_kinds: set[type[ServerEvent]] = set()
        if self.host_bus is not None:
            # Only the embedding server's own tools and prompts ever change; a standalone store's never do.
            if requested.tools_list_changed:
                host_kinds.add(ToolsListChanged)
            if requested.prompts_list_changed:
                host_kinds.add(PromptsListChanged)
        feed = Feed(
            caller.namespace,
            list_changed=bool(requested.resources_list_changed),
            interval=self.interval,
            host_kinds=frozenset(host_kinds),
        )
        for uri in uris:
            if not is_store_uri(uri):
                if self.host_bus is not None:
                    feed.watch(uri, None)
                continue
            try:
                ref = parse_store_uri(uri)
                if ref is None:
                    continue
                await self.service.get_artifact(caller, ref.artifact_id)
            except BlobstoreError as exc:
                if exc.code in ("not_found", "invalid_request", "invalid_range"):
                    # Left out of the acknowledgment, the same for unknown, expired and foreign artifacts.
                    continue
                raise
            feed.watch(uri, ref.artifact_id)
        honored = SubscriptionFilter(
            tools_list_changed=True if ToolsListChanged in host_kinds else None,
            prompts_list_changed=True if PromptsListChanged in host_kinds else None,
            resources_list_changed=True if feed.list_changed else None,
            resource_subscriptions=list(feed.uris) or None,
        )
        return honored, feed

    @mcp_handler
    async def listen(
        self, ctx: ServerRequestContext[Any, Any], params: SubscriptionsListenRequestParams
    ) -> SubscriptionsListenResult:
        subscription_id = ctx.request_id
        if subscription_id is None:
            raise MCPError(INVALID_REQUEST, "subscriptions/listen requires a request id")
        honored, feed = await self._honored(self._caller(ctx), params.notifications)
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: subscription_id}

        async def send(event: ServerEvent) -> None:
            await ctx.session.send_notification(
                event_to_notification(event, meta), related_request_id=subscription_id
            )

        # Attach before acknowledging, so a change made while the acknowledgment is on its way is not lost;
        # the acknowledgment still goes first, because only this task writes to the stream.
        detach = self._attach(feed)
        detach_host = self.host_bus.subscribe(feed.offer_host) if self.host_bus is not None else None
        try:
            await ctx.session.send_notification(
                SubscriptionsAcknowledgedNotification(
                    params=SubscriptionsAcknowledgedNotificationParams(notifications=honored, _meta=meta)
                ),
                related_request_id=subscription_id,
            )
            await feed.run(send)
        finally:
            if detach_host is not None:
                detach_host()
            detach()
        return SubscriptionsListenResult(_meta=meta)

    def close(self) -> None:
        """End every feed: listen streams close gracefully (with their result), session feeds stop sending."""
        for feed in list(self._feeds):
            feed.close()

    # -- registration ----------------------------------------------------------------------------------------

    def install(
        self, server: Server[Any], *, session_subscriptions: bool = True, listen: bool = True
    ) -> None:
        """Serve notifications on ``server``: ``subscriptions/listen`` when ``listen``;
        ``resources/subscribe``, ``resources/unsubscribe``, the session feeds and the ``listChanged``
        capability of the handshake era when ``session_subscriptions`` (False where no session has a standing
        channel: stateless HTTP).

        Handlers the server already has for other URI schemes keep answering for them.
        """
        if listen:
            server.add_request_handler("subscriptions/listen", SubscriptionsListenRequestParams, self.listen)
        server.lifespan = self.wrap_lifespan(server.lifespan)
        if not session_subscriptions:
            return
        subscribe = by_scheme(self.subscribe, server.get_request_handler("resources/subscribe"), EmptyResult)
        unsubscribe = by_scheme(
            self.unsubscribe, server.get_request_handler("resources/unsubscribe"), EmptyResult
        )
        server.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)
        server.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, unsubscribe)
        server.middleware.extend([self.track_sessions, advertise_list_changed])


async def advertise_list_changed(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Middleware: the handshake-era ``initialize`` result says ``resources.listChanged``.

    The low-level server takes that flag only as an argument of ``create_initialization_options``, which the
    runner, the in-memory client and ``server.run`` callers invoke without one, and a server the store is
    embedded in is not ours to subclass; so the result is amended on its way out (the SDK's own advice for
    wrapping ``initialize``), keeping whatever tool and prompt flags it has.
    """
    result = await call_next(ctx)
    if ctx.method == "initialize" and isinstance(result, dict):
        capabilities = result.get("capabilities")
        resources = capabilities.get("resources") if isinstance(capabilities, dict) else None
        if isinstance(resources, dict):
            resources["listChanged"] = True
    return result


__all__ = [
    "LIST_CHANGED_INTERVAL",
    "MAX_SUBSCRIPTIONS",
    "Feed",
    "StoreNotifications",
    "advertise_list_changed",
]

"""Id mapping between the host, the upstream and the proxy's own requests.

Every request the host sends upstream gets a proxy id (``"bp-<nonce>-<n>"``), and so does every request the
upstream sends the host; answers and ``notifications/cancelled`` travel back under the original ids. The
proxy's own requests to the upstream draw from the same id space, so none of the three can collide.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


def id_key(ident: Any) -> str:
    """A dict key that keeps 1 and "1" apart (JSON-RPC ids are typed)."""
    return json.dumps(ident)


def wire(message: Any) -> bytes:
    """A message as the compact JSON the proxy writes."""
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()


Raw = bytes | Mapping[str, Any]
"""A message as it came (its bytes), or as parsed when it was read incrementally."""


@dataclass
class Pending:
    """A host request forwarded upstream, awaiting its response."""

    host_id: Any
    method: str
    params: dict[str, Any]
    handle: Callable[[Pending, Raw, dict[str, Any]], Awaitable[None]] | None = None
    """How to treat the response; None forwards it as it came."""
    release: Callable[[], Awaitable[None]] | None = None
    """What to undo once the request is over: the files of a call's path arguments."""

    async def over(self) -> None:
        """The request is answered, cancelled or its upstream gone: run :attr:`release`, once."""
        release, self.release = self.release, None
        if release is not None:
            await release()


@dataclass
class Own:
    """A request the proxy itself sent upstream."""

    future: asyncio.Future[dict[str, Any]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class IdMap:
    """The requests in flight through the proxy, in both directions, by proxy id."""

    def __init__(self) -> None:
        self._nonce = secrets.token_hex(6)
        self._counter = itertools.count(1)
        self._pending: dict[str, Pending | Own] = {}
        self._host_ids: dict[str, str] = {}  # host id key -> proxy id
        self._server_requests: dict[str, Any] = {}  # proxy id -> upstream's request id
        self._server_ids: dict[str, str] = {}  # upstream id key -> proxy id

    def new_id(self) -> str:
        return f"bp-{self._nonce}-{next(self._counter)}"

    # -- requests to the upstream (the host's and the proxy's own) -----------------------------------------

    def forward(self, pending: Pending) -> str:
        """Register a host request on its way upstream; its proxy id."""
        proxy_id = self.new_id()
        self._pending[proxy_id] = pending
        self._host_ids[id_key(pending.host_id)] = proxy_id
        return proxy_id

    def own(self) -> tuple[str, Own]:
        proxy_id = self.new_id()
        own = Own()
        self._pending[proxy_id] = own
        return proxy_id, own

    def settle(self, proxy_id: str) -> Pending | Own | None:
        """The request the upstream answered under ``proxy_id``, now no longer in flight."""
        entry = self._pending.pop(proxy_id, None)
        if isinstance(entry, Pending):
            self._host_ids.pop(id_key(entry.host_id), None)
        return entry

    def in_flight(self) -> list[str]:
        return list(self._pending)

    def pending(self, proxy_id: str) -> Pending | None:
        """The host request in flight under ``proxy_id``."""
        entry = self._pending.get(proxy_id)
        return entry if isinstance(entry, Pending) else None

    def for_host_id(self, host_id: Any) -> str | None:
        """The proxy id of a host request still in flight upstream (to cancel it)."""
        return self._host_ids.get(id_key(host_id))

    # -- requests from the upstream to the host -------------------------------------------------------------

    def from_upstream(self, upstream_id: Any) -> str:
        proxy_id = self.new_id()
        self._server_requests[proxy_id] = upstream_id
        self._server_ids[id_key(upstream_id)] = proxy_id
        return proxy_id

    def answered_by_host(self, proxy_id: Any) -> tuple[bool, Any]:
        """(known, the upstream's own id) for the host's answer to a server-to-client request."""
        if not isinstance(proxy_id, str) or proxy_id not in self._server_requests:
            return False, None
        original = self._server_requests.pop(proxy_id)
        self._server_ids.pop(id_key(original), None)
        return True, original

    def cancelled_by_upstream(self, upstream_id: Any) -> str | None:
        """The proxy id the host knows an upstream request by, which the upstream has now cancelled."""
        known = self._server_ids.pop(id_key(upstream_id), None)
        if known is not None:
            self._server_requests.pop(known, None)
        return known


def restore_id(raw: Raw, proxy_id: str, host_id: Any, message: dict[str, Any]) -> bytes | dict[str, Any]:
    """The upstream's response with the host's id put back, replacing that one token in the raw bytes."""
    if not isinstance(raw, bytes):
        return {**message, "id": host_id}
    token = wire(proxy_id)
    if raw.count(token) == 1:
        return raw.replace(token, wire(host_id))
    return wire({**message, "id": host_id})

"""An ASGI guard over every request body: a stall timeout, a minimum rate and an overall size cap.

Each ``receive`` that should bring body bytes must bring them within ``timeout`` seconds, and the body must
average at least ``min_rate`` bytes per second over every ``window`` seconds (as Apache ``mod_reqtimeout``
``MinRate`` does), or the request fails with ``request_timeout``: the exception surfaces inside whatever is
reading the body, so the storage layer discards its temp file on the way out and nothing stays held by a
client that went quiet or trickles. A body is complete with its last message or with its last declared byte
(``Content-Length``), whichever comes first; from then on ``receive`` is passed through untouched (a
streaming response waits on it for the disconnect).

The rate is the client's: only the time spent waiting inside ``receive`` counts, so an app that is slow to
consume (a busy disk, an S3 part upload) never makes its client look slow.

The size cap is a backstop for every endpoint (each endpoint has its own, smaller limit): a declared
``Content-Length`` above it is refused before the app runs, a body that grows past it fails with
``too_large``.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections import deque
from collections.abc import Iterable

import anyio
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from blobstore.api.errors import error_response
from blobstore.errors import InvalidRequest, RequestTimeout, TooLarge

MULTIPART_ALLOWANCE = 1024 * 1024
"""Room above the largest artifact for a multipart envelope and its form fields."""
LINGER_SECONDS = 30.0
"""How long the rest of a body the answer did not wait for is read and dropped before the answer goes out
(nginx's ``lingering_time`` is 30 s too); a client still sending after it gets the answer with the connection
closed."""


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            text = value.decode("latin-1")
            if not text.isdigit():
                raise InvalidRequest("Content-Length must be a decimal number")
            return int(text)
    return None


class MinimumRate:
    """The minimum body rate as a sliding window over the time spent waiting for the client.

    From ``window`` seconds of waiting on, the bytes that arrived during the last ``window`` seconds of
    waiting must be at least ``rate * window``. Arrivals are grouped into slots spanning at most
    ``window / _SLOTS`` seconds each (a slot's bytes count until its latest arrival leaves the window, which
    errs towards the client by less than one slot), so the cost per message stays constant however small the
    pieces are.
    """

    _SLOTS = 16

    def __init__(self, rate: float, window: float) -> None:
        self.rate = rate
        self.window = window
        self.need = rate * window
        self._slot = window / self._SLOTS
        # [waited seconds at the slot's first arrival, at its latest arrival, bytes]
        self._arrivals: deque[list[float]] = deque()
        self.waited = 0.0

    def record(self, size: int) -> None:
        if size <= 0 or self.need <= 0:
            return
        if self._arrivals and self.waited - self._arrivals[-1][0] < self._slot:
            last = self._arrivals[-1]
            last[1] = self.waited
            last[2] += size
        else:
            self._arrivals.append([self.waited, self.waited, float(size)])
        while self._arrivals and self._arrivals[0][1] <= self.waited - self.window:
            self._arrivals.popleft()

    def allowance(self) -> float:
        """Seconds the client may still wait with nothing arriving before it falls below the rate."""
        if self.need <= 0:
            return math.inf
        at = max(self.waited, self.window)
        recent = [(stamp, size) for _first, stamp, size in self._arrivals if stamp > at - self.window]
        remaining = sum(size for _stamp, size in recent)
        if remaining < self.need:
            return at - self.waited
        for stamp, size in recent:
            remaining -= size
            if remaining < self.need:
                return stamp + self.window - self.waited
        raise AssertionError("unreachable: need is positive")


class BodyGuard:
    def __init__(
        self, app: ASGIApp, *, timeout: float, max_body: int, min_rate: float = 0, window: float = 30.0
    ) -> None:
        self.app = app
        self.timeout = timeout
        self.max_body = max_body
        self.min_rate = min_rate
        self.window = window

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            declared = _declared_length(scope)
            if declared is not None and declared > self.max_body:
                raise TooLarge(f"request body exceeds {self.max_body} bytes", max_size=self.max_body)
        except (InvalidRequest, TooLarge) as exc:
            await error_response(exc)(scope, receive, send)
            return
        received = 0
        complete = False
        refused = False
        rate = MinimumRate(self.min_rate, self.window)
        watch = _Watch()

        async def guarded() -> Message:
            nonlocal received, complete, refused
            if complete:
                return await receive()
            allowance = rate.allowance()
            started = time.monotonic()
            try:
                watch.arm(min(self.timeout, allowance))
                message = await receive()
            except asyncio.CancelledError:
                if not watch.expired():
                    raise
                message = None
            finally:
                watch.disarm()
            rate.waited += time.monotonic() - started
            if message is None:
                refused = True
                if allowance < self.timeout:
                    raise RequestTimeout(
                        f"the request body arrived slower than {self.min_rate:g} bytes per second "
                        f"over {self.window:g} seconds",
                        min_rate=self.min_rate,
                        window_seconds=self.window,
                    )
                raise RequestTimeout(timeout_seconds=self.timeout)
            if message["type"] == "http.request":
                size = len(message.get("body", b""))
                received += size
                if received > self.max_body:
                    refused = True
                    raise TooLarge(f"request body exceeds {self.max_body} bytes", max_size=self.max_body)
                complete = not message.get("more_body", False)
                if not complete and received == declared:
                    # The last declared byte ends the body (RFC 9112, 6.3: Content-Length "defines the
                    # expected message body length"). granian sends the end as one more, empty message,
                    # which a stop can drop: the request would wait for it until cancelled.
                    complete = True
                    message = {**message, "more_body": False}
                rate.record(size)
            else:
                complete = True
            return message

        if declared == 0 or (declared is None and not _chunked(scope)):
            try:
                await self.app(scope, guarded, send)
            finally:
                watch.close()
            return

        async def answering(message: Message) -> None:
            if message["type"] == "http.response.start" and not complete and not refused:
                # An answer before the end of the body (an upload refused half-way, on a full disk say):
                # a server that closes the connection with body bytes unread resets it, and the client,
                # still sending, never reads the answer. So the rest is read and dropped first, for a while;
                # not after this guard refused the body itself (too slow, too large): that answer goes now.
                with anyio.move_on_after(LINGER_SECONDS):
                    try:
                        while not complete:
                            await guarded()
                    except (RequestTimeout, TooLarge):
                        pass
                if not complete:
                    message = {**message, "headers": [*message.get("headers", ()), (b"connection", b"close")]}
            await send(message)

        try:
            await self.app(scope, guarded, answering)
        finally:
            watch.close()


class _Watch:
    """The stall timer of one request body: one timer handle, moved only when it fires.

    A cancel scope per ``receive`` cost a timer handle scheduled and cancelled for every message (thousands
    for one large body, most of them already waiting in the server's buffer). Here each wait only records its
    deadline; the handle, once scheduled, fires at its time, and then either cancels the task still waiting
    past its deadline or moves itself to the current wait's deadline. The deadlines are those of the cancel
    scope, to the loop's clock.

    The handle's time is kept here, not read back with ``when()``: uvloop turns a ``call_at`` due in under
    half a millisecond into a plain callback handle, which has none.
    """

    __slots__ = ("_deadline", "_expired", "_handle", "_loop", "_task", "_when")

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: asyncio.Handle | None = None
        self._when = math.inf
        self._task: asyncio.Task[object] | None = None
        self._deadline = math.inf
        self._expired = False

    def arm(self, seconds: float) -> None:
        """The current task waits from now for at most ``seconds``."""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        self._deadline = deadline = loop.time() + seconds
        handle = self._handle
        if handle is not None and self._when > deadline:
            handle.cancel()  # a deadline earlier than the handle's (the rate's allowance shrank)
            handle = None
        if handle is None and deadline != math.inf:
            self._schedule(deadline)

    def _schedule(self, deadline: float) -> None:
        assert self._loop is not None
        self._when = deadline
        self._handle = self._loop.call_at(deadline, self._fire)

    def disarm(self) -> None:
        self._task = None

    def expired(self) -> bool:
        """True once, for the cancellation this watch caused (the task's count of requests is restored)."""
        if not self._expired:
            return False
        self._expired = False
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
        return True

    def _fire(self) -> None:
        self._handle = None
        task = self._task
        if task is None:
            return  # not waiting: the next wait schedules the handle again
        assert self._loop is not None
        if self._loop.time() < self._deadline:
            self._schedule(self._deadline)
            return
        self._expired = True
        self._task = None
        task.cancel()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


def _chunked(scope: Scope) -> bool:
    return any(name == b"transfer-encoding" for name, _value in scope.get("headers", ()))


CONTROL = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
"""CTL characters other than HTAB (RFC 9110 §5.5); obs-text (0x80-0xFF) is allowed."""


def message_refusal(headers: Iterable[tuple[bytes, bytes]]) -> Response | None:
    """The ``400`` for header values with control characters or an ambiguous body framing, else None."""
    chunked = sized = False
    for name, value in headers:
        if CONTROL.search(value):
            # RFC 9110 §5.5: "Field values containing CR, LF, or NUL characters are invalid and dangerous
            # ... a recipient ... MUST either reject the message or replace each of those characters with
            # SP"; other CTLs are invalid too. Rejecting covers both. The value is not repeated.
            return error_response(
                InvalidRequest("a header value contains control characters", header=name.decode("latin-1"))
            )
        chunked = chunked or name == b"transfer-encoding"
        sized = sized or name == b"content-length"
    if chunked and sized:
        # RFC 9112 §6.1: "A server MAY reject a request that contains both Content-Length and
        # Transfer-Encoding or process such a request in accordance with the Transfer-Encoding alone.
        # Regardless, the server MUST close the connection after responding to such a request to avoid
        # the potential attacks." Rejected, and "Connection: close" makes the server close it.
        response = error_response(
            InvalidRequest("a request must not carry both Transfer-Encoding and Content-Length")
        )
        response.headers["connection"] = "close"
        return response
    return None


class MessageGuard:
    """Refuse, before any route runs, a request whose header values hold control characters or whose body
    framing is ambiguous. Both are ``400 invalid_request`` problems.

    Some ASGI servers refuse such requests themselves before the app sees them (docs/security.md says which);
    this answers the rest the same way.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = message_refusal(scope.get("headers", ()))
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)

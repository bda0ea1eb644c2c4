"""Request ids, the JSON access log and the HTTP metrics: one ASGI middleware around the whole API.

Every request gets an id: a client's ``X-Request-Id`` when it is sane (1 to 128 characters of
``A-Za-z0-9._:-``), otherwise a new random one. The id is sent back in the ``X-Request-Id`` response header,
in every problem+json body (``request_id``, via :func:`current_request_id`) and in the access line, so a
client's report can be found in the log.

The access line is one JSON object per request on the ``blobstore.access`` logger at
``BLOBSTORE_ACCESS_LOG_LEVEL``. It holds no header values, no query string and no body: tokens and content
never reach the log.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import sys
import time
from collections.abc import Callable
from contextvars import ContextVar, Token
from typing import Any, Final, TextIO

from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from blobstore import metrics
from blobstore.log_times import iso_millis, now_micros
from blobstore.request_ids import RequestIds

access_logger = logging.getLogger("blobstore.access")

REQUEST_ID_HEADER: Final = "x-request-id"
_SANE_ID: Final = re.compile(r"[A-Za-z0-9._:-]{1,128}")
_LEVELS: Final = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING}

_request_id: ContextVar[str | None] = ContextVar("blobstore_request_id", default=None)
_ids: Final = RequestIds()

_quote: Final[Callable[[str], str]] = json.encoder.encode_basestring_ascii
"""A JSON string literal, as ``json.dumps`` writes it with ``ensure_ascii`` (the C implementation)."""


def current_request_id() -> str | None:
    """The id of the request being served in this task, if any."""
    return _request_id.get()


def request_id_from(scope: Scope) -> str:
    for name, value in scope.get("headers", ()):
        if name == b"x-request-id":
            text: str = value.decode("latin-1")
            if _SANE_ID.fullmatch(text):
                return text
            break
    return _ids.new()


def route_template(scope: Scope, routes: list[BaseRoute]) -> str:
    """The template of the route that served the request (bounded label values), or ``unmatched``."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    if isinstance(path, str):
        return path
    probe = {"type": "http", "path": scope.get("path", ""), "method": scope.get("method", "GET")}
    for candidate in routes:
        match, _ = candidate.matches({**probe, "root_path": ""})
        if match is not Match.NONE:
            found = getattr(candidate, "path", None)
            return found if isinstance(found, str) else "unmatched"
    return "unmatched"


def begin_request(scope: Scope) -> tuple[str, Token[str | None]]:
    """The request's id (:func:`request_id_from`), which :func:`current_request_id` gives until
    :func:`end_request`."""
    request_id = request_id_from(scope)
    return request_id, _request_id.set(request_id)


def end_request(token: Token[str | None]) -> None:
    _request_id.reset(token)


class Answer:
    """The ``send`` of one request: passes each message on with ``X-Request-Id`` added to the head, and keeps
    the status and the body bytes sent (a ``pathsend`` counts its declared ``Content-Length``)."""

    __slots__ = ("_declared", "_request_id", "_send", "bytes_out", "head_sent", "status")

    def __init__(self, send: Send, request_id: str) -> None:
        self._send = send
        self._request_id = request_id.encode("latin-1")
        self._declared: int | None = None
        # A request that fails before its response starts is counted and logged as the 500 it ends as.
        self.status = 500
        self.bytes_out = 0
        self.head_sent = False

    async def __call__(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            self.status = int(message["status"])
            self.head_sent = True
            headers = [(k, v) for k, v in message.get("headers", ()) if k.lower() != b"x-request-id"]
            headers.append((b"x-request-id", self._request_id))
            for name, value in headers:
                if name.lower() == b"content-length" and value.isdigit():
                    self._declared = int(value)
            message = {**message, "headers": headers}
        elif kind == "http.response.body":
            self.bytes_out += len(message.get("body", b""))
        elif kind == "http.response.pathsend" and self._declared is not None:
            self.bytes_out += self._declared
        await self._send(message)


class Observe:
    """Outermost middleware: request id, metrics and the access line for every HTTP request."""

    def __init__(self, app: ASGIApp, *, routes: list[BaseRoute], access_log_level: str) -> None:
        self.app = app
        self.routes = routes
        self.level = _LEVELS.get(access_log_level)
        # Labelled metric children by label values: ``labels()`` validates and locks on every call.
        self._counted: dict[tuple[str, str, str], Any] = {}
        self._timed: dict[tuple[str, str], Any] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id, token = begin_request(scope)
        started = time.perf_counter()
        bytes_in = 0
        answer = Answer(send, request_id)

        async def counting_receive() -> Message:
            nonlocal bytes_in
            message = await receive()
            if message["type"] == "http.request":
                bytes_in += len(message.get("body", b""))
            return message

        # A request that fails before its response starts is counted and logged as the 500 it ends as. The id
        # stays set for that failure: the server-error handler outside this middleware puts it in the answer.
        try:
            await self.app(scope, counting_receive, answer)
            _request_id.reset(token)
        finally:
            route = route_template(scope, self.routes)
            elapsed = time.perf_counter() - started
            self.account(scope, request_id, route, answer.status, elapsed, bytes_in, answer.bytes_out)

    def account(
        self,
        scope: Scope,
        request_id: str,
        route: str,
        status: int,
        elapsed: float,
        bytes_in: int,
        bytes_out: int,
    ) -> None:
        """The metrics and the access line of one request that ended (``route``: its template)."""
        method = str(scope.get("method", ""))
        self._counter(method, route, status).inc()
        self._histogram(method, route).observe(elapsed)
        if bytes_in:
            metrics.BYTES_IN.inc(bytes_in)
        if bytes_out:
            metrics.BYTES_OUT.inc(bytes_out)
        if self.level is not None and access_logger.isEnabledFor(self.level):
            self._log(scope, request_id, method, route, status, elapsed, bytes_in, bytes_out)

    def _counter(self, method: str, route: str, status: int) -> Any:
        key = (method, route, str(status))
        child = self._counted.get(key)
        if child is None:
            child = self._counted[key] = metrics.HTTP_REQUESTS.labels(*key)
        return child

    def _histogram(self, method: str, route: str) -> Any:
        key = (method, route)
        child = self._timed.get(key)
        if child is None:
            child = self._timed[key] = metrics.HTTP_DURATION.labels(*key)
        return child

    def _log(
        self,
        scope: Scope,
        request_id: str,
        method: str,
        route: str,
        status: int,
        elapsed: float,
        bytes_in: int,
        bytes_out: int,
    ) -> None:
        client = scope.get("client")
        assert self.level is not None
        # The object json.JSONEncoder would write for these fields in this order, byte for byte (strings
        # escaped to ASCII by its own C function, numbers as their repr), without its per-call setup.
        text = (
            f'{{"ts":"{iso_millis(now_micros())}","event":"http_request",'
            f'"request_id":{_quote(request_id)},"method":{_quote(method)},'
            f'"path":{_quote(scope.get("path", ""))},"route":{_quote(route)},"status":{status:d},'
            f'"duration_ms":{round(elapsed * 1000, 3)!r},"bytes_in":{bytes_in:d},"bytes_out":{bytes_out:d},'
            f'"client":{_quote(client[0]) if client else "null"}}}'
        )
        handler = _own_handler()
        if handler is not None:
            # Only the server's own handler would see the record, and it writes the message as it is: the
            # LogRecord (its time, thread and process lookups) is skipped. A failed write takes the logger's
            # path, whose handler reports it as it reports any failed emit.
            try:
                with handler.lock or contextlib.nullcontext():
                    handler.stream.write(text + "\n")
                    handler.stream.flush()
                return
            except Exception:  # noqa: S110 -- reported by the handler on the path below
                pass
        # Handed to the logger's handlers as a ready record: Logger.log would first walk the stack to find
        # the caller's file and line, which the line does not use (a few % of a small range read).
        record = access_logger.makeRecord(access_logger.name, self.level, __file__, 0, text, (), None, "_log")
        access_logger.handle(record)


def _own_handler() -> logging.StreamHandler[TextIO] | None:
    """:func:`configure_access_log`'s handler when it is the logger's only destination (no other handler, no
    filter, no propagation), else None."""
    handlers = access_logger.handlers
    if len(handlers) != 1 or access_logger.propagate or access_logger.filters:
        return None
    handler = handlers[0]
    if not getattr(handler, "blobstore_access", False) or handler.filters:
        return None
    assert isinstance(handler, logging.StreamHandler)
    return handler


def configure_access_log(access_log_level: str) -> None:
    """For a server process: access lines go to stderr as they are (one JSON object a line).

    The ``blobstore.access`` logger gets its own handler (once) and does not propagate, so an ASGI server's
    own logging setup neither drops nor duplicates them. Embedding applications skip this and route the
    logger as they like.
    """
    level = _LEVELS.get(access_log_level)
    if level is None:
        access_logger.disabled = True
        return
    access_logger.setLevel(level)
    if not any(getattr(handler, "blobstore_access", False) for handler in access_logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        handler.blobstore_access = True  # type: ignore[attr-defined]
        access_logger.addHandler(handler)
    access_logger.propagate = False

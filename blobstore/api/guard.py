"""An ASGI guard over every request body: a stall timeout and an overall size cap.

Each ``receive`` that should bring body bytes must bring them within ``timeout`` seconds, or the request fails
with ``request_timeout``: the exception surfaces inside whatever is reading the body, so the storage layer
discards its temp file on the way out and nothing stays held by a client that went quiet. Once the body is
complete, ``receive`` is passed through untouched (a streaming response waits on it for the disconnect).

The size cap is a backstop for every endpoint (each endpoint has its own, smaller limit): a declared
``Content-Length`` above it is refused before the app runs, a body that grows past it fails with
``too_large``.
"""

from __future__ import annotations

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from blobstore.api.errors import error_response
from blobstore.errors import InvalidRequest, RequestTimeout, TooLarge

MULTIPART_ALLOWANCE = 1024 * 1024
"""Room above the largest artifact for a multipart envelope and its form fields."""


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            text = value.decode("latin-1")
            if not text.isdigit():
                raise InvalidRequest("Content-Length must be a decimal number")
            return int(text)
    return None


class BodyGuard:
    def __init__(self, app: ASGIApp, *, timeout: float, max_body: int) -> None:
        self.app = app
        self.timeout = timeout
        self.max_body = max_body

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

        async def guarded() -> Message:
            nonlocal received, complete
            if complete:
                return await receive()
            with anyio.move_on_after(self.timeout) as timer:
                message = await receive()
            if timer.cancelled_caught:
                raise RequestTimeout(timeout_seconds=self.timeout)
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body:
                    raise TooLarge(f"request body exceeds {self.max_body} bytes", max_size=self.max_body)
                complete = not message.get("more_body", False)
            else:
                complete = True
            return message

        await self.app(scope, guarded, send)

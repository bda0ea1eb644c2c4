"""Which MCP server to talk to, and a connection to it whose failures are one line a person can act on.

A server is a command run on stdio (``-- CMD ARGS…``, with this process's environment) or a streamable-HTTP
URL (``--url``, with ``--header`` lines such as a bearer token), in either protocol era: ``auto`` asks the
server (2026-07-28 ``server/discover``, falling back to the ``initialize`` handshake), ``legacy`` forces the
handshake, a version pins it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import REQUEST_TIMEOUT
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

PROTOCOLS: Final = ("auto", "legacy", *MODERN_PROTOCOL_VERSIONS)
CONNECT_SECONDS: Final = 30.0
ANSWER_SECONDS: Final = 300.0
"""How long one answer may take by default (``--timeout``): a tool may work for minutes."""


class CommandFailure(Exception):
    """A failure told in one line (``str(exc)``); ``status`` is the exit status it ends a command with."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Target:
    """A server to connect to: ``command`` (stdio) or ``url`` (streamable HTTP), never both."""

    command: tuple[str, ...] = ()
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    protocol: str = "auto"
    env: Mapping[str, str] = field(default_factory=dict)
    """Set for the command on top of this process's environment."""
    cwd: Path | None = None
    timeout: float = ANSWER_SECONDS

    def __post_init__(self) -> None:
        if self.url is None and not self.command:
            raise CommandFailure("name the server: a command after --, or --url", status=2)
        if self.url is not None and self.command:
            raise CommandFailure("name either a server command or --url, not both", status=2)
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise CommandFailure(f"--url: expected an http:// or https:// URL, got {self.url!r}", status=2)
        if self.protocol not in PROTOCOLS:
            raise CommandFailure(
                f"--protocol: expected one of {', '.join(PROTOCOLS)}, got {self.protocol!r}", 2
            )

    @property
    def name(self) -> str:
        """What the server is called in messages: the URL, or the command's program."""
        return self.url if self.url is not None else os.path.basename(self.command[0])


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups, in order; ``exc`` itself when it is not a group."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in leaves(sub)]
    return [exc]


def mcp_error_line(exc: MCPError) -> str:
    """An error answer as one line: the message, and the stable code a store puts in ``data.reason``."""
    data = exc.data if isinstance(exc.data, dict) else {}
    reason = data.get("reason")
    code = f"{exc.code}, {reason}" if isinstance(reason, str) else str(exc.code)
    return f"{exc.message} ({code})"


@dataclass
class HttpRefusal:
    """The latest HTTP error status of a connection: the SDK's transport turns it into a JSON-RPC error
    that no longer says which (``Server returned an error response``), so an event hook keeps it."""

    status: int | None = None
    reason: str = ""

    async def on_response(self, response: httpx2.Response) -> None:
        if response.status_code >= 400:
            self.status, self.reason = response.status_code, response.reason_phrase


def explain(exc: BaseException, target: Target, refusal: HttpRefusal | None = None) -> CommandFailure | None:
    """The one line for a failure of the connection or the protocol, or None for one this module does not
    know (the caller's own errors pass through)."""
    for leaf in leaves(exc):
        if isinstance(leaf, CommandFailure):
            return leaf
    if refusal is not None and refusal.status is not None:
        return CommandFailure(f"{target.url} answered HTTP {refusal.status} {refusal.reason}")
    for leaf in leaves(exc):
        if isinstance(leaf, FileNotFoundError | PermissionError) and target.url is None:
            return CommandFailure(f"cannot start the server {target.command[0]!r}: {leaf.strerror}")
        if isinstance(leaf, httpx2.ConnectError | httpx2.ConnectTimeout):
            return CommandFailure(f"cannot connect to {target.url}: {leaf}")
        if isinstance(leaf, httpx2.HTTPStatusError):
            status = leaf.response.status_code
            return CommandFailure(f"{target.url} answered HTTP {status} {leaf.response.reason_phrase}")
        if isinstance(leaf, httpx2.HTTPError):
            return CommandFailure(f"HTTP request to {target.url} failed: {type(leaf).__name__}: {leaf}")
        if isinstance(leaf, MCPError):
            if leaf.code == REQUEST_TIMEOUT:
                return CommandFailure(
                    f"the server {target.name} did not answer within {target.timeout:g} s ({leaf.message})"
                )
            if leaf.message == "Connection closed":
                return CommandFailure(
                    f"the server {target.name} closed the connection before answering (see its output above)"
                )
            return CommandFailure(f"the server answered with an error: {mcp_error_line(leaf)}")
        if isinstance(leaf, ValidationError):
            return CommandFailure(
                f"the server's answer is not valid MCP: {leaf.error_count()} problem(s), "
                f"first: {_first_problem(leaf)}"
            )
        if isinstance(leaf, TimeoutError):
            return CommandFailure(f"the server {target.name} did not answer within {target.timeout:g} s")
    return None


def _first_problem(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error.get("loc", ()))
    return f"{where}: {error.get('msg')}" if where else str(error.get("msg"))


@contextlib.asynccontextmanager
async def connect(target: Target) -> AsyncIterator[Client]:
    """A connected client; a failure of the connection or the protocol leaves as a :class:`CommandFailure`."""
    refusal = HttpRefusal()
    try:
        async with contextlib.AsyncExitStack() as stack:
            server: Any
            if target.url is not None:
                http = await stack.enter_async_context(
                    httpx2.AsyncClient(
                        headers=dict(target.headers),
                        timeout=httpx2.Timeout(CONNECT_SECONDS, read=target.timeout),
                        event_hooks={"response": [refusal.on_response]},
                    )
                )
                server = streamable_http_client(target.url, http_client=http)
            else:
                server = StdioServerParameters(
                    command=target.command[0],
                    args=list(target.command[1:]),
                    # A person runs the server as their shell would: with their whole environment.
                    env={**os.environ, **target.env},
                    cwd=target.cwd,
                )
            mode = target.protocol
            # No response cache: reads of windows are written to files once, and holding them is memory.
            client = await stack.enter_async_context(
                Client(server, mode=mode, read_timeout_seconds=target.timeout, cache=None)
            )
            yield client
    except Exception as exc:
        explained = explain(exc, target, refusal)
        if explained is None:
            raise
        raise explained from None

"""Raw HTTP/1.1 over a real socket, for what an HTTP client library will not send: bodies that trickle, header
values with control bytes, ``Transfer-Encoding`` together with ``Content-Length``."""

from __future__ import annotations

import json
import select
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

ANSWER_DEADLINE_SECONDS = 60.0
"""A guard against hanging the suite when a server never answers; not a measurement."""


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes
    sent_body_bytes: int = 0
    closed: bool = False

    def json(self) -> Any:
        return json.loads(self.body)


def connect(url: str) -> socket.socket:
    parts = urlsplit(url)
    sock = socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=30)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def head_bytes(method: str, target: str, headers: list[tuple[str, str]] | list[tuple[bytes, bytes]]) -> bytes:
    lines = [f"{method} {target} HTTP/1.1".encode()]
    for name, value in headers:
        raw_name = name if isinstance(name, bytes) else name.encode("latin-1")
        raw_value = value if isinstance(value, bytes) else value.encode("latin-1")
        lines.append(raw_name + b": " + raw_value)
    return b"\r\n".join(lines) + b"\r\n\r\n"


class Reader:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""
        self.eof = False

    def fill(self) -> None:
        try:
            data = self.sock.recv(65536)
        except (ConnectionResetError, TimeoutError):
            data = b""
        if not data:
            self.eof = True
        self.buffer += data

    def complete(self) -> RawResponse | None:
        """The response, once its head and body are in the buffer (or the peer closed)."""
        head, sep, rest = self.buffer.partition(b"\r\n\r\n")
        if not sep:
            if self.eof:
                raise ConnectionError(f"connection closed before a response head: {self.buffer!r}")
            return None
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        headers: dict[str, str] = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        status = int(status_line.split(" ")[1])
        if "content-length" in headers:
            wanted = int(headers["content-length"])
            if len(rest) < wanted:
                if self.eof:
                    raise ConnectionError("connection closed inside the response body")
                return None
            return RawResponse(status, headers, rest[:wanted], closed=self.eof)
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = _dechunk(rest)
            if body is None:
                if self.eof:
                    raise ConnectionError("connection closed inside a chunked response body")
                return None
            return RawResponse(status, headers, body, closed=self.eof)
        if not self.eof:
            return None
        return RawResponse(status, headers, rest, closed=True)


def _dechunk(data: bytes) -> bytes | None:
    out = b""
    while True:
        line, sep, data = data.partition(b"\r\n")
        if not sep:
            return None
        size = int(line.split(b";")[0], 16)
        if size == 0:
            return out
        if len(data) < size + 2:
            return None
        out += data[:size]
        data = data[size + 2 :]


def exchange(url: str, request: bytes) -> RawResponse:
    """Send ``request`` whole and read the response."""
    with connect(url) as sock:
        sock.sendall(request)
        reader = Reader(sock)
        deadline = time.monotonic() + ANSWER_DEADLINE_SECONDS
        while time.monotonic() < deadline:
            response = reader.complete()
            if response is not None:
                return response
            reader.fill()
    raise AssertionError("no response within the deadline")


def send_paced(
    url: str,
    head: bytes,
    pieces: Iterator[bytes],
    interval: float,
) -> RawResponse:
    """Send ``head``, then one piece of body every ``interval`` seconds until the pieces run out or the server
    answers; returns the answer (read to its end). Fails if nothing comes within the deadline."""
    with connect(url) as sock:
        sock.sendall(head)
        reader = Reader(sock)
        sent = 0
        exhausted = False
        deadline = time.monotonic() + ANSWER_DEADLINE_SECONDS
        next_send = time.monotonic()
        while time.monotonic() < deadline:
            wait = max(0.0, next_send - time.monotonic()) if not exhausted else 1.0
            readable, _, _ = select.select([sock], [], [], wait)
            if readable:
                reader.fill()
                response = reader.complete()
                if response is not None:
                    response.sent_body_bytes = sent
                    return response
                continue
            if exhausted:
                continue
            piece = next(pieces, None)
            if piece is None:
                exhausted = True
                continue
            try:
                sock.sendall(piece)
            except (BrokenPipeError, ConnectionResetError):
                exhausted = True
                continue
            sent += len(piece)
            next_send += interval
    raise AssertionError("the server did not answer within the deadline")

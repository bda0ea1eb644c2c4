"""Malformed messages on real sockets against ``blobstore serve`` under each supported ASGI server: header
values with control bytes, and requests with both ``Transfer-Encoding`` and ``Content-Length`` (RFC 9112
§6.1).

Where the app sees such a request it answers ``400`` problem+json, and for the framing conflict closes the
connection. Some servers decide before the app runs, and none of them can be configured otherwise; what each
does is asserted here as documented in docs/security.md:

- granian (the default) answers control bytes in a header value with its own empty ``400``; it removes
  ``Content-Length`` when ``Transfer-Encoding`` is present, so the app reads the body by the transfer coding
  alone (as §6.1 allows), and it closes the connection after responding;
- uvicorn (httptools) answers both with its own ``text/plain`` ``400`` and closes the connection;
- hypercorn (h11) passes both to the app.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from starlette.types import Message, Receive, Scope, Send

from blobstore.api.guard import MessageGuard
from tests.fixtures.server import Server, serving
from tests.security.rawhttp import RawResponse, Reader, connect, head_bytes

SERVERS = ["granian", "uvicorn", "hypercorn"]


@pytest.fixture(scope="module", params=SERVERS)
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serving(tmp_path_factory.mktemp("framing"), "--server", request.param) as running:
        yield running


def server_name(server: Server) -> str:
    command = server.process.args
    assert isinstance(command, list)
    return str(command[command.index("--server") + 1])


def answer_then_eof(server: Server, request: bytes) -> tuple[RawResponse, bool]:
    """Send ``request`` on a keep-alive connection; the response, and whether the server then closed it."""
    with connect(server.url) as sock:
        sock.sendall(request)
        reader = Reader(sock)
        response = reader.complete()
        while response is None:
            reader.fill()
            response = reader.complete()
        if reader.eof:
            return response, True
        # A server that keeps the connection answers a second request on it; one that closed it sends EOF.
        try:
            sock.sendall(head_bytes("GET", "/healthz", [("Host", "127.0.0.1")]))
        except (BrokenPipeError, ConnectionResetError):
            return response, True
        sock.settimeout(30)
        try:
            data = sock.recv(65536)
        except ConnectionResetError:
            return response, True
        except TimeoutError:
            return response, False
        return response, data == b""


def stored_names(server: Server) -> list[str]:
    return [item["name"] for item in httpx.get(f"{server.url}/v1/artifacts").json()["items"]]


def problem(response: RawResponse, code: str) -> None:
    assert response.status == 400, (response.status, response.body)
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["code"] == code


def test_a_request_with_transfer_encoding_and_content_length_is_refused_and_its_connection_closed(
    server: Server,
) -> None:
    request = head_bytes(
        "POST",
        "/v1/artifacts?name=smuggled.bin",
        [("Host", "127.0.0.1"), ("Transfer-Encoding", "chunked"), ("Content-Length", "5")],
    )
    response, closed = answer_then_eof(server, request + b"5\r\nhello\r\n0\r\n\r\n")
    assert closed
    name = server_name(server)
    if name == "granian":
        # Content-Length never reaches the app: the body is read by the transfer coding alone.
        assert response.status == 201, (response.status, response.body)
        assert response.json()["size"] == 5
        return
    if name == "uvicorn":
        assert (response.status, response.headers["content-type"]) == (400, "text/plain; charset=utf-8")
    else:
        problem(response, "invalid_request")
    assert "smuggled.bin" not in stored_names(server)


def test_an_if_none_match_with_control_bytes_is_a_400(server: Server) -> None:
    stored = httpx.post(f"{server.url}/v1/artifacts", params={"name": "etag.bin"}, content=b"etag")
    assert stored.status_code == 201, stored.text
    path = f"/v1/artifacts/{stored.json()['id']}/content"
    request = head_bytes("GET", path, [(b"Host", b"127.0.0.1"), (b"If-None-Match", b'"sha256-\x01"')])
    response, _closed = answer_then_eof(server, request)
    name = server_name(server)
    if name == "granian":
        assert (response.status, response.body, "content-type" in response.headers) == (400, b"", False)
    elif name == "uvicorn":
        assert (response.status, response.headers["content-type"]) == (400, "text/plain; charset=utf-8")
    else:
        problem(response, "invalid_request")


def test_obs_text_and_tabs_in_header_values_are_not_control_bytes(server: Server) -> None:
    stored = httpx.post(f"{server.url}/v1/artifacts", params={"name": "obs.bin"}, content=b"obs")
    path = f"/v1/artifacts/{stored.json()['id']}/content"
    request = head_bytes("GET", path, [(b"Host", b"127.0.0.1"), (b"If-None-Match", b'"caf\xe9",\t"x"')])
    response, _closed = answer_then_eof(server, request)
    assert (response.status, response.body) == (200, b"obs")


# -- the app's own answer, whatever server runs it -----------------------------------------------------------


async def call_in_process(headers: list[tuple[bytes, bytes]]) -> tuple[int, dict[str, str], dict[str, Any]]:
    reached: list[bool] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        reached.append(True)

    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/artifacts",
        "headers": headers,
        "query_string": b"",
    }
    await MessageGuard(app)(scope, receive, send)
    assert not reached
    start = sent[0]
    response_headers = {k.decode(): v.decode() for k, v in start["headers"]}
    return start["status"], response_headers, json.loads(sent[1]["body"])


@pytest.mark.parametrize("value", [b"a\x00b", b"a\rb", b"a\nb", b"\x1b[31m", b"a\x7fb"])
async def test_the_app_refuses_control_bytes_in_any_header_value(value: bytes) -> None:
    status, headers, body = await call_in_process([(b"host", b"x"), (b"x-note", value)])
    assert (status, headers["content-type"], body["code"]) == (
        400,
        "application/problem+json",
        "invalid_request",
    )
    assert body["header"] == "x-note"


async def test_the_app_refuses_both_framings_and_asks_for_the_connection_to_close() -> None:
    status, headers, body = await call_in_process(
        [(b"host", b"x"), (b"transfer-encoding", b"chunked"), (b"content-length", b"5")]
    )
    assert (status, body["code"], headers["connection"]) == (400, "invalid_request", "close")

"""A hand-written MCP server on stdio for the proxy's tests of large and hostile messages.

It writes its JSON-RPC lines itself, so it can send what an SDK never would: a result of hundreds of
megabytes written in pieces (never held whole here either), a banner before the first message, lines that
are not JSON, answers under ids nobody asked for, a burst of progress notifications, a call it never answers,
and an exit in the middle of a line. Payload bytes are deterministic (:func:`payload_block`), so a test can
recompute their SHA-256 without holding them.

``python raw_upstream.py [--banner]``; tool ``big`` (arguments ``size``, ``kind`` = image | audio | blob |
text, ``mime``, ``id_last``, ``copies``), ``resources/read`` of ``raw://big/<size>``, and the hostile tools
listed in :data:`TOOLS`.

``python raw_upstream.py --http PORT --sse|--json`` serves the same over streamable HTTP (``0``: any free
port, printed as ``listening on PORT``): each request's answer a chunked body, as server-sent events (each
message one ``message`` event) or as the JSON written (everything the call writes, garbage included).
"""

from __future__ import annotations

import base64
import hashlib
import io
import itertools
import json
import os
import queue
import random
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final, Protocol

BLOCK: Final = 3 * 1024 * 1024
"""Payload bytes are made and written in blocks of this size (a multiple of 3, so base64 joins cleanly)."""

TOOLS: Final = [
    {"name": "big", "description": "A large payload in one result.", "inputSchema": {"type": "object"}},
    {"name": "echo", "description": "Echo the text back.", "inputSchema": {"type": "object"}},
    {"name": "never", "description": "Never answers (until cancelled).", "inputSchema": {"type": "object"}},
    {
        "name": "progress_burst",
        "description": "Many progress notifications.",
        "inputSchema": {"type": "object"},
    },
    {
        "name": "strays",
        "description": "Answers under unknown and repeated ids.",
        "inputSchema": {"type": "object"},
    },
    {
        "name": "garbage",
        "description": "Invalid JSON lines, then an answer.",
        "inputSchema": {"type": "object"},
    },
    {"name": "endless", "description": "A line that never ends.", "inputSchema": {"type": "object"}},
    {"name": "cut", "description": "Exits in the middle of its answer.", "inputSchema": {"type": "object"}},
    {"name": "media", "description": "Returns the image given as base64.", "inputSchema": {"type": "object"}},
    {"name": "hangup", "description": "Ends the GET stream.", "inputSchema": {"type": "object"}},
    {"name": "silent", "description": "Ends its answer with no answer.", "inputSchema": {"type": "object"}},
    {
        "name": "polled",
        "description": "Over SSE: names an event id, closes the stream, answers on the GET that resumes it.",
        "inputSchema": {"type": "object"},
    },
    {
        "name": "announce",
        "description": "Sends a notification outside the call (over HTTP on the GET stream), then answers.",
        "inputSchema": {"type": "object"},
    },
]


def payload_block(index: int, size: int) -> bytes:
    return random.Random(index).randbytes(size)


def payload(size: int) -> Iterator[bytes]:
    """The deterministic payload of ``size`` bytes, block by block."""
    for index, start in enumerate(range(0, size, BLOCK)):
        yield payload_block(index, min(BLOCK, size - start))


def payload_sha256(size: int) -> str:
    digest = hashlib.sha256()
    for block in payload(size):
        digest.update(block)
    return digest.hexdigest()


def text_payload(size: int) -> Iterator[bytes]:
    line = b"The quick brown fox jumps over the lazy dog. 0123456789\n"
    whole, rest = divmod(size, len(line))
    per_block = BLOCK // len(line)
    for start in range(0, whole, per_block):
        yield line * min(per_block, whole - start)
    yield line[:rest]


def text_sha256(size: int) -> str:
    digest = hashlib.sha256()
    for block in text_payload(size):
        digest.update(block)
    return digest.hexdigest()


class Output(Protocol):
    def write(self, data: bytes, /) -> object: ...

    def flush(self) -> None: ...


_local = threading.local()
"""Where this thread's call writes: stdout, or the body of the HTTP answer it is serving."""


def output() -> Output:
    out: Output | None = getattr(_local, "out", None)
    return sys.stdout.buffer if out is None else out


def write(*parts: bytes) -> None:
    out = output()
    for part in parts:
        out.write(part)
    out.flush()


def send(message: dict[str, Any]) -> None:
    write(json.dumps(message).encode(), b"\n")


def encoded(size: int, kind: str) -> Iterator[bytes]:
    if kind == "text":
        yield from text_payload(size)  # plain ASCII lines: the JSON text is the text, "\n" escaped below
        return
    for block in payload(size):
        yield base64.b64encode(block)


def big_result(ident: Any, args: dict[str, Any]) -> None:
    size = int(args.get("size", 1024))
    kind = str(args.get("kind", "image"))
    mime = str(args.get("mime", "image/png" if kind == "image" else "application/octet-stream"))
    copies = int(args.get("copies", 1))
    head = (
        b'{"jsonrpc":"2.0","id":' + json.dumps(ident).encode() + b',"result":'
        if not args.get("id_last")
        else b'{"result":'
    )
    if args.get("where") == "meta":
        # The payload where no offload rule looks: all of it is what the proxy would have to hold.
        write(head, b'{"content":[{"type":"text","text":"see _meta"}],"_meta":{"blob":"')
        for piece in encoded(size, "blob"):
            write(piece)
        write(b'"}}}\n')
        return
    write(head, b'{"content":[')
    for copy in range(copies):
        if copy:
            write(b",")
        if kind == "text":
            write(b'{"type":"text","text":"')
            for piece in encoded(size, kind):
                write(piece.replace(b"\n", b"\\n"))
            write(b'"}')
            continue
        if kind == "blob":
            write(
                b'{"type":"resource","resource":{"uri":"raw://report.bin","mimeType":',
                json.dumps(mime).encode(),
                b',"blob":"',
            )
        else:
            write(
                b'{"type":',
                json.dumps(kind).encode(),
                b',"mimeType":',
                json.dumps(mime).encode(),
                b',"data":"',
            )
        for piece in encoded(size, kind):
            write(piece)
        write(b'"}}' if kind == "blob" else b'"}')
    write(b"]")
    if args.get("mirror"):
        # As the reference filesystem server does: the same block again in structuredContent.
        write(b',"structuredContent":{"content":[{"type":', json.dumps(kind).encode(), b',"data":"')
        for piece in encoded(size, kind):
            write(piece)
        write(b'","mimeType":', json.dumps(mime).encode(), b"}]}")
    write(b"}")
    if args.get("id_last"):
        write(b',"jsonrpc":"2.0","id":', json.dumps(ident).encode())
    write(b"}\n")


def big_resource(ident: Any, uri: str) -> None:
    size = int(uri.rsplit("/", 1)[-1])
    write(
        b'{"jsonrpc":"2.0","id":',
        json.dumps(ident).encode(),
        b',"result":{"contents":[{"uri":',
        json.dumps(uri).encode(),
    )
    write(b',"mimeType":"application/octet-stream","blob":"')
    for piece in encoded(size, "blob"):
        write(piece)
    write(b'"}]}}\n')


def call(ident: Any, params: dict[str, Any]) -> None:
    name = params.get("name")
    args = params.get("arguments") or {}
    if name == "big":
        big_result(ident, args)
    elif name == "echo":
        text = args.get("text", "")
        size = len(text) if isinstance(text, str) else 0
        digest = hashlib.sha256(text.encode()).hexdigest() if isinstance(text, str) else ""
        send(
            {
                "jsonrpc": "2.0",
                "id": ident,
                "result": {"content": [{"type": "text", "text": f"{size} {digest}"}]},
            }
        )
    elif name == "never":
        cancelled = threading.Event()
        pending_forever[json.dumps(ident)] = cancelled
        if serving_http:
            cancelled.wait()  # the answer's stream stays open, silent, until the call is cancelled
    elif name == "progress_burst":
        token = (params.get("_meta") or {}).get("progressToken")
        count = int(args.get("count", 100_000))
        for step in range(1, count + 1):
            note = {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progressToken": token, "progress": step, "total": count},
            }
            output().write(json.dumps(note).encode() + b"\n")
        output().flush()
        send(
            {
                "jsonrpc": "2.0",
                "id": ident,
                "result": {"content": [{"type": "text", "text": f"{count} sent"}]},
            }
        )
    elif name == "strays":
        stray = {"content": [{"type": "text", "text": "stray"}]}
        send({"jsonrpc": "2.0", "id": "bp-nobody-1", "result": stray})
        send({"jsonrpc": "2.0", "id": 12345, "result": stray})
        answer = {"jsonrpc": "2.0", "id": ident, "result": {"content": [{"type": "text", "text": "first"}]}}
        send(answer)
        send({**answer, "result": {"content": [{"type": "text", "text": "second"}]}})
    elif name == "garbage":
        write(b"this is not JSON\n", b'{"jsonrpc": "2.0", "id": \n', b"\xff\xfe\n", b"[1, 2, 3]\n")
        send(
            {
                "jsonrpc": "2.0",
                "id": ident,
                "result": {"content": [{"type": "text", "text": "after garbage"}]},
            }
        )
    elif name == "endless":
        head = b'{"jsonrpc":"2.0","id":' + json.dumps(ident).encode()
        write(head, b',"result":{"content":[],"_meta":{"log":"')
        chunk = b"x" * (1024 * 1024)
        for _ in range(int(args.get("megabytes", 64))):
            write(chunk)
        # Then nothing more on this line, ever: the test ends the process.
        if serving_http:
            threading.Event().wait()
        sys.stdin.read()
    elif name == "cut":
        write(
            b'{"jsonrpc":"2.0","id":',
            json.dumps(ident).encode(),
            b',"result":{"content":[{"type":"text","text":"half',
        )
        os._exit(4)
    elif name == "silent":
        pass
    elif name == "polled":
        answer = {"jsonrpc": "2.0", "id": ident, "result": {"content": [{"type": "text", "text": "polled"}]}}
        body = getattr(_local, "body", None)
        if body is None:
            send(answer)
            return
        # As a server that closes the stream to be polled: a priming event with an id and a retry, then
        # the answer only to the GET that resumes after that id.
        event = f"p-{len(replays) + 1}"
        replays[event] = answer
        body.write(f"id: {event}\nretry: 100\ndata:\n\n".encode())
        body.flush()
    elif name == "hangup":
        outside.put(HANGUP)
        send({"jsonrpc": "2.0", "id": ident, "result": {"content": [{"type": "text", "text": "hung up"}]}})
    elif name == "announce":
        note = {
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": "info", "data": str(args.get("text", "announced"))},
        }
        if serving_http:
            outside.put(note)
        else:
            send(note)
        send({"jsonrpc": "2.0", "id": ident, "result": {"content": [{"type": "text", "text": "announced"}]}})
    elif name == "media":
        block = {"type": "image", "data": args.get("data", ""), "mimeType": args.get("mime", "image/png")}
        send({"jsonrpc": "2.0", "id": ident, "result": {"content": [block]}})
    else:
        send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32602, "message": f"unknown tool {name}"}})


pending_forever: dict[str, threading.Event] = {}
serving_http = False
outside: queue.Queue[dict[str, Any]] = queue.Queue()
"""Messages for the GET stream: what the server sends outside any request."""
replays: dict[str, dict[str, Any]] = {}
"""What a GET with ``Last-Event-ID`` gets, by that id."""
listened = itertools.count(1)
"""Ids of the GET stream's events."""
HANGUP: Final[dict[str, Any]] = {}
"""Put in :data:`outside`: the GET stream ends there."""


def dispatch(message: dict[str, Any]) -> None:
    method = message.get("method")
    ident = message.get("id")
    params = message.get("params") or {}
    if method == "initialize":
        result = {
            "protocolVersion": params.get("protocolVersion", "2025-11-25"),
            "capabilities": {"tools": {}, "resources": {}},
            "serverInfo": {"name": "raw-upstream", "version": "1.0"},
        }
        send({"jsonrpc": "2.0", "id": ident, "result": result})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": ident, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        call(ident, params)
    elif method == "resources/read":
        big_resource(ident, str(params.get("uri")))
    elif method == "notifications/cancelled":
        key = json.dumps(params.get("requestId"))
        if key in pending_forever:
            pending_forever.pop(key).set()
            # Recorded on stderr, where the test can see the cancellation arrived.
            sys.stderr.write(f"cancelled {params.get('requestId')}\n")
            sys.stderr.flush()
    elif ident is not None and method is not None:
        send({"jsonrpc": "2.0", "id": ident, "result": {}})


def main() -> None:
    if "--http" in sys.argv:
        serve_http(int(sys.argv[sys.argv.index("--http") + 1]), events="--json" not in sys.argv)
        return
    if "--banner" in sys.argv:
        write(b"raw-upstream 1.0 starting\n", b"listening on stdio...\n")
    for line in sys.stdin.buffer:
        if line.strip():
            dispatch(json.loads(line))


class Chunked:
    """An HTTP/1.1 chunked body: every write one chunk, as it is written."""

    def __init__(self, wfile: io.BufferedIOBase) -> None:
        self._wfile = wfile

    def write(self, data: bytes, /) -> object:
        if data:
            self._wfile.write(b"%x\r\n" % len(data) + data + b"\r\n")
        return None

    def flush(self) -> None:
        self._wfile.flush()

    def finish(self) -> None:
        self._wfile.write(b"0\r\n\r\n")
        self._wfile.flush()


class Events:
    """Each ``\\n``-ended message written becomes one ``message`` event, its data passed on as it comes."""

    def __init__(self, body: Chunked) -> None:
        self._body = body
        self._fresh = True

    def write(self, data: bytes, /) -> object:
        *ended, rest = data.split(b"\n")
        for line in ended:
            self._part(line)
            self._body.write(b"\n\n")
            self._fresh = True
        if rest:
            self._part(rest)
        return None

    def _part(self, data: bytes) -> None:
        if self._fresh:
            self._body.write(b"event: message\ndata: ")
            self._fresh = False
        self._body.write(data)

    def flush(self) -> None:
        self._body.flush()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Each write goes out at once: Nagle's algorithm would hold a chunk until the last one is acknowledged.
    disable_nagle_algorithm = True
    events = True

    def _body(self) -> bytes:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            parts = []
            while size := int(self.rfile.readline().split(b";")[0], 16):
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return b"".join(parts)
        return self.rfile.read(int(self.headers.get("content-length", 0)))

    def do_POST(self) -> None:
        message = json.loads(self._body())
        if "method" not in message or "id" not in message:
            dispatch(message)
            self.send_response(202)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream" if self.events else "application/json")
        self.send_header("transfer-encoding", "chunked")
        if message.get("method") == "initialize":
            self.send_header("mcp-session-id", "raw-session-1")
        self.end_headers()
        body = Chunked(self.wfile)
        _local.out = Events(body) if self.events else body
        _local.body = body if self.events else None
        try:
            dispatch(message)
        finally:
            _local.out = _local.body = None
        body.finish()

    def do_GET(self) -> None:
        if not self.events:
            self.send_response(405)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        after = self.headers.get("last-event-id")
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        body = Chunked(self.wfile)
        if after in replays:
            answer = json.dumps(replays.pop(after)).encode()
            body.write(b"id: " + after.encode() + b"-answer\ndata: " + answer + b"\n\n")
            body.finish()
            return
        # The standalone stream: its events are numbered, and each notes the Last-Event-ID the stream was
        # opened after, so a test sees what a reopening client asked for.
        _local.out = Events(body)
        while (message := outside.get()) is not HANGUP:
            body.write(f"id: g-{next(listened)}\n".encode())
            send({**message, "params": {**message["params"], "_meta": {"openedAfter": after}}})
        _local.out = None
        body.finish()

    def do_DELETE(self) -> None:
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return None


def serve_http(port: int, *, events: bool) -> None:
    global serving_http
    serving_http = True
    Handler.events = events
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    sys.stdout.write(f"listening on {server.server_address[1]}\n")
    sys.stdout.flush()
    server.serve_forever()


if __name__ == "__main__":
    main()

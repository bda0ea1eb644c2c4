"""A local HTTP server standing in for a host's file service (ChatGPT's ``download_url``s)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

from tests.fixtures.threaded_http import serving_on_a_thread


@contextlib.contextmanager
def file_service(files: dict[str, bytes]) -> Iterator[tuple[str, list[str]]]:
    """Serves ``files`` by path (the query ignored) on a free loopback port; yields its origin and the paths
    asked for."""
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.partition("?")[0]
            asked.append(path)
            body = files.get(path)
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    with serving_on_a_thread(Handler) as origin:
        yield origin, asked

"""The CORS examples of docs/http-api.md as written: the documented ``serve --cors-origins`` line, and the
curl preflight against it."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from tests.e2e import docs_examples as doc
from tests.fixtures.server import start_server, stop_server

pytestmark = pytest.mark.e2e


def test_documented_preflight_is_answered_by_the_documented_serve_line(tmp_path: Path) -> None:
    serve = shlex.split(doc.line("blobstore serve --cors-origins"))
    assert serve[:2] == ["blobstore", "serve"]
    server = start_server(tmp_path, *serve[2:])
    try:
        result = doc.run(doc.block("Access-Control-Request-Method: GET"), tmp_path, B=server.url)
    finally:
        stop_server(server)

    head = result.stdout.decode().lower()
    assert head.startswith("http/1.1 204")
    assert "access-control-allow-origin: http://localhost:5173\r\n" in head
    allowed = next(line for line in head.splitlines() if line.startswith("access-control-allow-headers:"))
    for name in ("authorization", "range", "tus-resumable", "upload-offset"):
        assert name in allowed

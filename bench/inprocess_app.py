"""The app ``blobstore serve`` runs, built in this process for the in-process probes, and their requests."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, TextIO


def quiet_app(data_dir: Path, quiet: TextIO) -> Any:
    """The app on local disk and SQLite under ``data_dir`` (the defaults of ``blobstore serve``).

    Access lines are written as a server writes them, to ``quiet``, a stream nobody reads (the suite sends
    the server's standard error to /dev/null too).
    """
    os.environ["BLOBSTORE_DATA_DIR"] = str(data_dir)
    os.environ.setdefault("BLOBSTORE_LOG_LEVEL", "warning")
    from blobstore.asgi import app_from_env

    app = app_from_env()
    for handler in logging.getLogger("blobstore.access").handlers:
        if isinstance(handler, logging.StreamHandler):
            handler.setStream(quiet)
    return app


def http_scope(method: str, path: str, query: bytes, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    """An HTTP/1.1 request from a loopback client, as an ASGI server hands it over."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), *headers],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }

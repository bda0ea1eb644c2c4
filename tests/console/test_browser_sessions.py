"""Console sessions in a real browser: headless Chromium (``js/sessions.mjs``) against a real ``blobstore
serve`` with tokens, and an attacker's page on another port of 127.0.0.1.

- Cookie tossing: while the admin is logged in, the attacker's page sets ``blobstore_console=<the attacker's
  own session>; path=/`` (cookies do not keep ports apart, so the browser sends both). The console treats
  the request as logged out and says why, instead of acting as the attacker's token in its namespace; an
  upload
  through the page lands nowhere; logging in again clears the tossed cookie.
- Log out, then the old cookie put back: the page is the login form, and a ``DELETE`` with the old CSRF
  token deletes nothing.
- *Run cleanup* lands on a page by a redirect: a reload is a ``GET`` and runs nothing again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.console.test_browser import create_token, drive, put
from tests.fixtures.browser import CHROMIUM, playwright_ready
from tests.fixtures.server import Server, serving
from tests.fixtures.threaded_http import serving_on_a_thread

JS_DIR = Path(__file__).parent / "js"


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str, str]]:
    root = tmp_path_factory.mktemp("sessions-server")
    token_a = create_token(root / "data", "alpha", "read,write,admin")
    token_b = create_token(root / "data", "beta", "read,write")
    with serving(root) as running:
        yield running, token_a, token_b


def attackers_session(server: Server, token: str) -> str:
    """The attacker logs in with its own token and keeps the session id its cookie carries."""
    answer = httpx.post(f"{server.url}/console/login", data={"token": token})
    assert answer.status_code == 303
    found = re.match(r"blobstore_console=([^;]+)", answer.headers["set-cookie"])
    assert found is not None
    return found.group(1)


def attacker_page(cookie: str) -> type[BaseHTTPRequestHandler]:
    class TossingPage(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            # Only the page itself tosses the cookie: Chromium asks for /favicon.ico on its own schedule, and
            # a toss answering that late would put the cookie back after the console cleared it. The data:
            # icon keeps the browser from asking at all.
            if self.path != "/":
                self.send_error(404)
                return
            body = (
                b'<!doctype html><title>a local dev server</title><link rel="icon" href="data:,">'
                b"<p>nothing to see"
            )
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Set-Cookie", f"blobstore_console={cookie}; Path=/")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return TossingPage


def test_tossed_and_replayed_cookies_open_nothing_and_a_reload_runs_no_cleanup(
    console: tuple[Server, str, str],
) -> None:
    playwright_ready(JS_DIR)
    server, token_a, token_b = console
    auth = {"Authorization": f"Bearer {token_a}"}
    artifact_id = put(server, token_a, b"the admin's report", "report.txt", "text/plain")
    with serving_on_a_thread(attacker_page(attackers_session(server, token_b))) as attacker:
        assert attacker.rsplit(":", 1)[1] != server.url.rsplit(":", 1)[1]
        seen = drive(
            JS_DIR / "sessions.mjs",
            {
                "chromium": str(CHROMIUM),
                "server": server.url,
                "attacker": attacker,
                "tokenA": token_a,
                "artifactId": artifact_id,
                "stepTimeoutMs": 30_000,
            },
        )
    assert "failed" not in seen, (seen.get("failed"), seen["steps"], seen["console"])
    assert "alpha" in seen["before"]

    # The tossed cookie sits beside the admin's; the console answers with the login form and says why.
    assert seen["tossed"] == ["blobstore_console /", "blobstore_console /console"]
    after = seen["afterToss"]
    assert "/console/login" in after["url"], after
    assert after["who"] is None  # no namespace shown: neither the admin's nor the attacker's
    assert after["notice"] is not None
    assert "two console cookies" in after["notice"].lower()
    assert after["upload"]["status"] == 401, after["upload"]
    assert json.loads(after["upload"]["body"])["code"] == "unauthorized"
    # Both cookies were cleared, the tossed one (path /) included.
    assert after["cookies"] == []
    beta = httpx.get(f"{server.url}/v1/artifacts", headers={"Authorization": f"Bearer {token_b}"}).json()[
        "items"
    ]
    assert beta == []
    # Logging in again works as the admin.
    assert "alpha" in seen["relogged"]["who"]
    assert seen["relogged"]["cookies"] == ["blobstore_console /console"]

    # Log out, then the old cookie put back: the login form, and the old CSRF token deletes nothing.
    assert "/console/login" in seen["loggedOut"]["url"]
    assert seen["loggedOut"]["cookies"] == []
    replay = seen["replay"]
    assert "/console/login" in replay["url"]
    assert replay["who"] is None
    assert replay["delete"]["status"] == 401
    assert replay["read"]["status"] == 401
    kept = httpx.get(f"{server.url}/v1/artifacts/{artifact_id}", headers=auth)
    assert kept.status_code == 200

    # Run cleanup: one POST, answered by a redirect to the Operate page; the reload posts nothing.
    cleanup = seen["cleanup"]
    assert cleanup["summary"].startswith("Freed")
    assert not cleanup["url"].endswith("/console/operate/cleanup")
    assert cleanup["postsBeforeReload"] == 1
    assert cleanup["postsAfterReload"] == 1
    assert cleanup["urlAfterReload"] == cleanup["url"]
    assert cleanup["summaryAfterReload"] == 0
    assert not [line for line in seen["console"] if line.startswith("pageerror")], seen["console"]

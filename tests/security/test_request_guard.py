"""The request guard in front of every route (``blobstore.api.request_guard``), in process, in local mode (no
token: the mode a page on the user's own machine could abuse): a foreign ``Host`` is ``421
host_not_allowed`` on the list, content, ``DELETE``, tus, the console, share links and ``/mcp``; a change a
page of another origin sends is ``403 cross_origin_refused`` and stores nothing; a trusted proxy's forwarded
headers make the server's own origin, an untrusted peer's do not; plain clients (no ``Origin``) pass.

The same attacks in a real browser are in ``tests/browser/test_guard_browser.py``.
"""

from __future__ import annotations

import contextlib
import html
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from blobstore.api import create_app
from blobstore.api.deps import app_state
from blobstore.runtime import open_service
from mcp_resources.transports.http import McpHttpExtension
from tests.fixtures.mcp_wire import initialize_request
from tests.fixtures.problems import problem
from tests.fixtures.settings import make_settings
from tests.security.conftest import running

PORT = 8420
OWN = f"http://127.0.0.1:{PORT}"
REBOUND = f"rebind.attacker.example:{PORT}"
ELSEWHERE = "http://localhost:9999"
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
CSRF = re.compile(r'<meta name="csrf-token" content="([0-9a-f]*)">')
SHARE = re.compile(r'id="share-link" class="copyable" readonly value="([^"]+)"')


@contextlib.asynccontextmanager
async def local_store(
    tmp_path: Path, *, client: tuple[str, int] = ("127.0.0.1", 50000), **overrides: Any
) -> AsyncIterator[tuple[httpx.AsyncClient, FastAPI]]:
    """The app with ``/mcp`` and the console, no token (local mode), and a client at ``OWN``."""
    settings = make_settings(tmp_path, auth_cache_seconds=0, **overrides)
    async with open_service(settings, server=False) as service:
        app = create_app(settings, service=service, extensions=[McpHttpExtension(settings)])
        transport = httpx.ASGITransport(app=app, client=client)
        async with running(app), httpx.AsyncClient(transport=transport, base_url=OWN) as http:
            yield http, app


async def listed(http: httpx.AsyncClient) -> list[str]:
    answer = await http.get("/v1/artifacts")
    assert answer.status_code == 200, answer.text
    return [item["name"] for item in answer.json()["items"]]


async def share_link(http: httpx.AsyncClient, artifact_id: str) -> str:
    """A share link made through the console as a local user does (login, the page's CSRF token, the form)."""
    assert (await http.post("/console/login", data={"local": "1"})).status_code == 303
    page = await http.get(f"/console/artifacts/{artifact_id}")
    csrf = CSRF.search(page.text)
    assert csrf is not None, page.text
    made = await http.post(
        f"/console/artifacts/{artifact_id}/share",
        data={"csrf": csrf[1], "expires": "1h"},
        follow_redirects=True,  # the link is shown on the page the form's redirect leads to
    )
    found = SHARE.search(made.text)
    assert found is not None, made.text
    return html.unescape(found[1])


# -- DNS rebinding: the Host allow-list ------------------------------------------------------------------


async def test_a_foreign_host_is_refused_on_every_route_and_nothing_changes(tmp_path: Path) -> None:
    async with local_store(tmp_path) as (http, _app):
        stored = await http.post("/v1/artifacts", params={"name": "kept.txt"}, content=b"secret bytes")
        assert stored.status_code == 201
        artifact_id = stored.json()["id"]
        link = await share_link(http, artifact_id)
        assert (await http.get(link)).content == b"secret bytes"
        foreign = {"Host": REBOUND}
        answers = {
            "list": await http.get("/v1/artifacts", headers=foreign),
            "content": await http.get(f"/v1/artifacts/{artifact_id}/content", headers=foreign),
            "delete": await http.delete(f"/v1/artifacts/{artifact_id}", headers=foreign),
            "upload": await http.post("/v1/artifacts", params={"name": "x"}, content=b"x", headers=foreign),
            "tus": await http.post(
                "/tus/", headers={**foreign, "Tus-Resumable": "1.0.0", "Upload-Length": "3"}
            ),
            "console": await http.get("/console/artifacts", headers=foreign),
            "console login": await http.post("/console/login", data={"local": "1"}, headers=foreign),
            "share link": await http.get(link, headers=foreign),
            "mcp": await http.post(
                "/mcp", json=initialize_request("page"), headers={**MCP_HEADERS, **foreign}
            ),
            "docs": await http.get("/docs", headers=foreign),
        }
        for route, answer in answers.items():
            body = problem(answer, 421, "host_not_allowed")
            assert body["host"] == REBOUND, route
            assert "BLOBSTORE_ALLOWED_HOSTS" in body["detail"], route
        assert await listed(http) == ["kept.txt"]
        assert (await http.get(f"/v1/artifacts/{artifact_id}/content")).content == b"secret bytes"


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1", "127.0.0.1:8420", "localhost:3000", "LOCALHOST", "[::1]:8420", "[::1]", "10.1.2.3:8420"],
)
async def test_loopback_names_and_addresses_with_any_port_are_this_server(tmp_path: Path, host: str) -> None:
    async with local_store(tmp_path) as (http, _app):
        assert (await http.get("/v1/artifacts", headers={"Host": host})).status_code == 200


async def test_the_public_urls_host_and_the_allowed_hosts_are_answered_the_rest_refused(
    tmp_path: Path,
) -> None:
    settings: dict[str, Any] = {
        "public_url": "https://store.example.com",
        "allowed_hosts": "files.example.org,.lan.example",
    }
    async with local_store(tmp_path, **settings) as (http, _app):
        for host in ("store.example.com", "store.example.com:443", "files.example.org:8420", "a.lan.example"):
            assert (await http.get("/v1/artifacts", headers={"Host": host})).status_code == 200, host
        for host in ("example.com", "evil.store.example.com", "lan.example.evil", "localhost.example"):
            problem(await http.get("/v1/artifacts", headers={"Host": host}), 421, "host_not_allowed")


async def test_a_star_turns_the_host_check_off(tmp_path: Path) -> None:
    async with local_store(tmp_path, allowed_hosts="*") as (http, _app):
        assert (await http.get("/v1/artifacts", headers={"Host": REBOUND})).status_code == 200


@pytest.mark.parametrize("host", ["rebind.attacker.example:8420", "a b", "x/y", "[::1", "h:99999", "h:port"])
async def test_malformed_or_foreign_hosts_are_both_refused(tmp_path: Path, host: str) -> None:
    async with local_store(tmp_path) as (http, _app):
        problem(await http.get("/healthz", headers={"Host": host}), 421, "host_not_allowed")


# -- cross-site writes: Origin and Sec-Fetch-Site -----------------------------------------------------------


async def test_a_change_sent_by_a_page_of_another_origin_is_refused_and_stores_nothing(
    tmp_path: Path,
) -> None:
    async with local_store(tmp_path) as (http, app):
        form = {"file": ("planted.txt", b"planted", "text/plain")}
        refused = {
            "multipart form": await http.post("/v1/artifacts", files=form, headers={"Origin": ELSEWHERE}),
            "no-cors text/plain": await http.post(
                "/v1/artifacts?name=planted.txt",
                content=b"planted",
                headers={"Origin": ELSEWHERE, "Content-Type": "text/plain", "Sec-Fetch-Mode": "no-cors"},
            ),
            "opaque origin": await http.post(
                "/v1/artifacts?name=p", content=b"p", headers={"Origin": "null"}
            ),
            "another port": await http.post(
                "/v1/artifacts?name=p", content=b"p", headers={"Origin": "http://127.0.0.1:8421"}
            ),
            "another scheme": await http.post(
                "/v1/artifacts?name=p", content=b"p", headers={"Origin": "https://127.0.0.1:8420"}
            ),
            "fetch metadata only": await http.post(
                "/v1/artifacts?name=p", content=b"p", headers={"Sec-Fetch-Site": "cross-site"}
            ),
            "same site, other origin": await http.post(
                "/v1/artifacts?name=p", content=b"p", headers={"Sec-Fetch-Site": "same-site"}
            ),
            "tus": await http.post(
                "/tus/", headers={"Origin": ELSEWHERE, "Tus-Resumable": "1.0.0", "Upload-Length": "3"}
            ),
            "chunked upload": await http.post(
                "/v1/uploads", json={"name": "p"}, headers={"Origin": ELSEWHERE}
            ),
            "console login": await http.post(
                "/console/login", data={"local": "1"}, headers={"Origin": ELSEWHERE}
            ),
            "mcp": await http.post(
                "/mcp", json=initialize_request("page"), headers={**MCP_HEADERS, "Origin": ELSEWHERE}
            ),
        }
        for kind, answer in refused.items():
            problem(answer, 403, "cross_origin_refused")
            assert "set-cookie" not in answer.headers, kind
        assert refused["multipart form"].json()["origin"] == ELSEWHERE
        assert await listed(http) == []
        assert await app_state(app).runtime.repo.list_open_uploads() == []
        # /mcp checks Origin whatever the method (the MCP specification's rule); the API reads do not.
        problem(
            await http.get("/mcp", headers={"Origin": ELSEWHERE, **MCP_HEADERS}), 403, "cross_origin_refused"
        )
        assert (await http.get("/v1/artifacts", headers={"Origin": ELSEWHERE})).status_code == 200


async def test_the_servers_own_pages_and_plain_clients_may_change_things(tmp_path: Path) -> None:
    async with local_store(tmp_path) as (http, _app):
        allowed = {
            "own origin": {"Origin": OWN, "Sec-Fetch-Site": "same-origin"},
            "own origin by another loopback name": {
                "Origin": "http://localhost:8420",
                "Host": "localhost:8420",
            },
            "fetch metadata, same origin": {"Sec-Fetch-Site": "same-origin"},
            "typed by the user": {"Sec-Fetch-Site": "none"},
            "plain client": {},
        }
        for kind, headers in allowed.items():
            answer = await http.post("/v1/artifacts", params={"name": kind}, content=b"ok", headers=headers)
            assert answer.status_code == 201, (kind, answer.text)
        assert sorted(await listed(http)) == sorted(allowed)


async def test_a_listed_cors_origin_may_change_things_and_the_public_origin_is_the_servers_own(
    tmp_path: Path,
) -> None:
    settings: dict[str, Any] = {
        "cors_origins": "https://app.example.com",
        "public_url": "https://store.example.com/",
    }
    async with local_store(tmp_path, **settings) as (http, _app):
        for origin in ("https://app.example.com", "https://store.example.com"):
            headers = {"Origin": origin, "Sec-Fetch-Site": "cross-site"}
            answer = await http.post("/v1/artifacts", params={"name": origin}, content=b"ok", headers=headers)
            assert answer.status_code == 201, (origin, answer.text)


# -- forwarded headers: the server's own origin behind a proxy ----------------------------------------------


async def test_a_trusted_proxys_forwarded_scheme_and_host_make_the_servers_own_origin(tmp_path: Path) -> None:
    behind_tls = {"X-Forwarded-Proto": "https", "Host": "localhost:8443", "Origin": "https://localhost:8443"}
    async with local_store(tmp_path) as (http, _app):
        answer = await http.post("/v1/artifacts", params={"name": "a"}, content=b"a", headers=behind_tls)
        assert answer.status_code == 201, answer.text
        # Links follow the forwarded scheme and host too.
        assert answer.json()["content_url"].startswith("https://localhost:8443/v1/artifacts/")
        named = {
            "X-Forwarded-Host": "localhost:9443",
            "X-Forwarded-Proto": "https",
            "Origin": "https://localhost:9443",
        }
        assert (
            await http.post("/v1/artifacts", params={"name": "b"}, content=b"b", headers=named)
        ).status_code == 201
        # The forwarded host is checked like any Host.
        rebound = {"X-Forwarded-Host": REBOUND}
        problem(await http.get("/v1/artifacts", headers=rebound), 421, "host_not_allowed")


async def test_an_untrusted_peers_forwarded_headers_are_ignored(tmp_path: Path) -> None:
    behind_tls = {"X-Forwarded-Proto": "https", "Host": "localhost:8443", "Origin": "https://localhost:8443"}
    async with local_store(tmp_path, forwarded_allow_ips="10.9.9.9", allowed_hosts="*") as (http, _app):
        problem(
            await http.post("/v1/artifacts", params={"name": "a"}, content=b"a", headers=behind_tls),
            403,
            "cross_origin_refused",
        )
        # Nor does its X-Forwarded-Host lend it a name.
        assert (await http.get("/v1/artifacts", headers={"X-Forwarded-Host": REBOUND})).status_code == 200


async def test_the_client_a_trusted_proxy_names_is_the_client_for_local_mode(tmp_path: Path) -> None:
    async with local_store(tmp_path) as (http, _app):
        remote = await http.get("/v1/artifacts", headers={"X-Forwarded-For": "203.0.113.9, 127.0.0.1"})
        problem(remote, 401, "unauthorized")  # local mode serves loopback clients only
        assert (await http.get("/v1/artifacts", headers={"X-Forwarded-For": "127.0.0.1"})).status_code == 200
    async with local_store(tmp_path, forwarded_allow_ips="10.9.9.9") as (http, _app):
        spoofed = await http.get("/v1/artifacts", headers={"X-Forwarded-For": "203.0.113.9"})
        assert spoofed.status_code == 200  # its word is not taken: the peer (loopback) is the client

"""The request guard against a real browser: one headless Chromium for the module (``js/guard.mjs``, driven by
playwright-core), real ``blobstore serve`` processes, and Debian's nginx with TLS in front of two of them.

- A page of another origin on ``localhost`` posts a multipart form and a ``no-cors`` fetch with a
  ``text/plain`` body to the store at ``127.0.0.1``: both refused, nothing stored.
- DNS rebinding: Chromium maps ``rebind.attacker.example`` to ``127.0.0.1`` (``--host-resolver-rules``) and
  opens the console and the list under that name: refused (``421``); so are curl's requests with that
  ``Host`` to the list, the content, ``DELETE``, the console, a share link and ``/mcp``.
- Behind nginx with TLS (a self-signed certificate made here), the console logs in through its form and
  deletes an artifact, with ``BLOBSTORE_PUBLIC_URL=https://…``, and without it from the forwarded headers of a
  trusted proxy (loopback).
- ``/docs`` renders Swagger UI with every request on the server's own origin (every other name is unresolvable
  in this Chromium), under the console's Content-Security-Policy, ``X-Frame-Options: DENY`` and ``nosniff``.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import http.server
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.deploy.nginx import command, main_config
from tests.fixtures.browser import CHROMIUM, NODE, playwright_ready
from tests.fixtures.commands import run_cli
from tests.fixtures.mcp_wire import initialize_request
from tests.fixtures.ports import free_port
from tests.fixtures.server import Server, isolated_env, start_server, stop_process, stop_server
from tests.fixtures.threaded_http import serving_on_a_thread
from tests.fixtures.waiting import wait_until

JS_DIR = Path(__file__).parent / "js"
REBOUND = "rebind.attacker.example"
# The rebinding name goes to this machine, loopback resolves as always, and every other name resolves to
# nothing: no request of this browser can leave the machine (a CDN included).
RESOLVER_RULES = f"MAP {REBOUND} 127.0.0.1, EXCLUDE localhost, EXCLUDE 127.0.0.1, MAP * ~NOTFOUND"
DEADLINE_SECONDS = 120.0  # a watchdog against a hung browser or proxy, not a measurement
DOCS_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; media-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
"""The console's policy, with data: images (Swagger UI's icons)."""


class Chromium:
    """The driver process: one command in, one JSON answer out."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process

    def __call__(self, op: str, **args: Any) -> dict[str, Any]:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            assert self.process.stderr is not None
            raise AssertionError(f"the browser driver ended early:\n{self.process.stderr.read()}")
        answer: dict[str, Any] = json.loads(line)
        assert answer.pop("ok"), answer.get("error")
        return answer


def kill_group(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@pytest.fixture(scope="module")
def chromium() -> Iterator[Chromium]:
    playwright_ready(JS_DIR)
    config = {
        "chromium": str(CHROMIUM),
        "resolverRules": RESOLVER_RULES,
        "timeoutMs": int(DEADLINE_SECONDS * 1000),
        "docsTimeoutMs": 30_000,
    }
    with subprocess.Popen(
        [str(NODE), str(JS_DIR / "guard.mjs"), json.dumps(config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: Chromium goes with it if it must be killed
    ) as process:
        try:
            yield Chromium(process)
            assert process.stdin is not None
            process.stdin.close()
            process.wait(DEADLINE_SECONDS)
        finally:
            kill_group(process)


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def attacker_page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Any page of another site the local user opens: here one on ``localhost``, another port."""
    site = tmp_path_factory.mktemp("attacker")
    (site / "index.html").write_text("<!DOCTYPE html><title>a page elsewhere</title><p>nothing to see</p>")
    handler = functools.partial(QuietHandler, directory=str(site))
    with serving_on_a_thread(handler) as origin:
        yield origin.replace("127.0.0.1", "localhost") + "/index.html"


@pytest.fixture(scope="module")
def local_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``blobstore serve`` as the README starts it: loopback, no token (local mode), the console on."""
    server = start_server(tmp_path_factory.mktemp("local"))
    try:
        yield server
    finally:
        stop_server(server)


def names(server: Server) -> list[str]:
    answer = httpx.get(f"{server.url}/v1/artifacts")
    assert answer.status_code == 200, answer.text
    return sorted(item["name"] for item in answer.json()["items"])


def test_a_page_on_localhost_writes_nothing_to_the_store_on_127_0_0_1(
    chromium: Chromium, attacker_page: str, local_server: Server
) -> None:
    seen = chromium("crossSiteWrites", pageUrl=attacker_page, target=local_server.url)
    attacker_origin = attacker_page.removesuffix("/index.html")
    assert seen["form"] == {"status": 403, "origin": attacker_origin}
    assert (seen["fetch"]["status"], seen["fetch"]["type"]) == (403, "opaque")
    assert names(local_server) == []


def test_a_rebound_name_reaches_neither_the_console_nor_the_api(
    chromium: Chromium, local_server: Server
) -> None:
    stored = httpx.post(
        f"{local_server.url}/v1/artifacts", params={"name": "private.txt"}, content=b"private"
    )
    assert stored.status_code == 201
    port = local_server.url.rsplit(":", 1)[1]
    seen = chromium("rebind", consoleUrl=f"http://{REBOUND}:{port}/console")
    assert seen["console"]["status"] == 421
    assert "host_not_allowed" in seen["console"]["text"]
    assert seen["list"]["origin"] == f"http://{REBOUND}:{port}"
    assert seen["list"]["status"] == 421
    assert "private.txt" not in seen["list"]["body"]
    httpx.delete(f"{local_server.url}/v1/artifacts/{stored.json()['id']}").raise_for_status()


def curl_status(url: str, *args: str) -> tuple[int, str]:
    done = subprocess.run(
        ["curl", "-sS", "-o", "-", "-w", "\n%{http_code}", *args, url],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    body, _, status = done.stdout.rpartition("\n")
    return int(status), body


def test_curl_with_a_foreign_host_is_refused_everywhere(local_server: Server) -> None:
    stored = httpx.post(f"{local_server.url}/v1/artifacts", params={"name": "kept.bin"}, content=b"kept")
    artifact = stored.json()["id"]
    with httpx.Client(base_url=local_server.url) as browser:
        assert browser.post("/console/login", data={"local": "1"}).status_code == 303
        page = browser.get(f"/console/artifacts/{artifact}").text
        csrf = page.split('name="csrf-token" content="', 1)[1].split('"', 1)[0]
        shared = browser.post(
            f"/console/artifacts/{artifact}/share",
            data={"csrf": csrf, "expires": "1h"},
            follow_redirects=True,  # the link is shown on the page the form's redirect leads to
        )
        link = shared.text.split('id="share-link" class="copyable" readonly value="', 1)[1].split('"', 1)[0]
    link = link.replace("&amp;", "&")
    assert curl_status(link)[0] == 200
    port = local_server.url.rsplit(":", 1)[1]
    foreign = ["-H", f"Host: {REBOUND}:{port}"]
    mcp = ["-H", "Content-Type: application/json", "-H", "Accept: application/json, text/event-stream"]
    for url, extra in (
        (f"{local_server.url}/v1/artifacts", []),
        (f"{local_server.url}/v1/artifacts/{artifact}/content", []),
        (f"{local_server.url}/v1/artifacts/{artifact}", ["-X", "DELETE"]),
        (f"{local_server.url}/console/artifacts", []),
        (link, []),
        (f"{local_server.url}/mcp", [*mcp, "--data", json.dumps(initialize_request("curl"))]),
    ):
        status, body = curl_status(url, *foreign, *extra)
        assert (status, json.loads(body)["code"]) == (421, "host_not_allowed"), url
    assert names(local_server) == ["kept.bin"]
    httpx.delete(f"{local_server.url}/v1/artifacts/{artifact}").raise_for_status()


def test_docs_render_from_the_servers_own_files_under_the_consoles_headers(
    chromium: Chromium, local_server: Server
) -> None:
    seen = chromium("docs", url=f"{local_server.url}/docs")
    assert seen["status"] == 200
    assert seen["rendered"], seen
    assert seen["operations"] >= 20
    assert "mcp-blobstore" in (seen["title"] or "")
    elsewhere = [url for url in seen["requests"] if not url.startswith(f"{local_server.url}/")]
    assert elsewhere == []
    assert seen["violations"] == []
    paths = {url.removeprefix(local_server.url).split("?")[0] for url in seen["requests"]}
    assert paths == {
        "/docs",
        "/docs/assets/swagger-ui.css",
        "/docs/assets/swagger-ui-bundle.js",
        "/docs/assets/start.js",
        "/openapi.json",
    } | ({"/favicon.ico"} & paths)
    for path in paths - {"/openapi.json", "/favicon.ico"}:
        answer = httpx.get(f"{local_server.url}{path}")
        assert answer.headers["content-security-policy"] == DOCS_POLICY, path
        assert answer.headers["x-frame-options"] == "DENY", path
        assert answer.headers["x-content-type-options"] == "nosniff", path


# -- behind nginx with TLS ----------------------------------------------------------------------------------


def create_token(data_dir: Path) -> str:
    done = run_cli(
        ["token", "create", "--namespace", "ops", "--scopes", "read,write", "--json"],
        isolated_env({"BLOBSTORE_DATA_DIR": str(data_dir)}),
    )
    assert done.returncode == 0, done.stderr
    token: str = json.loads(done.stdout)["token"]
    return token


def self_signed(root: Path) -> tuple[Path, Path]:
    cert, key = root / "cert.pem", root / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost"),
            *("-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def tls_site(port: int, upstream: Server, cert: Path, key: Path, host_header: str) -> str:
    """The server block of docs/security.md's "Running behind TLS", on a test port with a test certificate."""
    upstream_port = upstream.url.rsplit(":", 1)[1]
    return f"""
server {{
    listen 127.0.0.1:{port} ssl;
    server_name localhost;
    ssl_certificate     {cert};
    ssl_certificate_key {key};

    client_max_body_size 5g;
    proxy_request_buffering off;
    proxy_buffering off;

    location / {{
        proxy_pass http://127.0.0.1:{upstream_port};
        proxy_http_version 1.1;
        proxy_set_header Host {host_header};
        proxy_set_header X-Forwarded-Proto $scheme;
    }}
}}
"""


@dataclass(frozen=True)
class Front:
    url: str
    server: Server
    token: str


@contextlib.contextmanager
def nginx(root: Path, sites: list[str], urls: list[str]) -> Iterator[None]:
    main = main_config(root, "\n".join(sites))
    process = subprocess.Popen(command(root, main, "-g", "daemon off;"), start_new_session=True)

    def answering() -> bool:
        if process.poll() is not None:
            raise AssertionError((root / "error.log").read_text(errors="replace"))
        try:
            return all(
                httpx.get(f"{url}/healthz", verify=False, timeout=5).status_code == 200 for url in urls
            )
        except httpx.TransportError:
            return False

    try:
        wait_until(answering, within=DEADLINE_SECONDS, what="nginx with TLS")
        yield
    finally:
        stop_process(process)


@pytest.fixture(scope="module")
def behind_tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Front]]:
    """Two servers with a token each behind one nginx with TLS: one told its public URL, one not (it takes
    the scheme from nginx's ``X-Forwarded-Proto``, nginx on loopback being a trusted proxy by default)."""
    root = tmp_path_factory.mktemp("tls")
    cert, key = self_signed(root)
    ports = {"public_url": free_port(), "forwarded": free_port()}
    urls = {kind: f"https://localhost:{port}" for kind, port in ports.items()}
    fronts: dict[str, Front] = {}
    with contextlib.ExitStack() as stack:
        for kind, env in (("public_url", {"BLOBSTORE_PUBLIC_URL": urls["public_url"]}), ("forwarded", {})):
            home = root / kind
            home.mkdir()
            token = create_token(home / "data")
            server = start_server(home, env=env)
            stack.callback(stop_server, server)
            fronts[kind] = Front(urls[kind], server, token)
        sites = [
            # As docs/security.md shows it: nginx's $host, the public URL names the port.
            tls_site(ports["public_url"], fronts["public_url"].server, cert, key, "$host"),
            # Without a public URL the forwarded Host must carry the port the browser used.
            tls_site(ports["forwarded"], fronts["forwarded"].server, cert, key, "$host:$server_port"),
        ]
        nginx_root = root / "nginx"
        nginx_root.mkdir()
        stack.enter_context(nginx(nginx_root, sites, list(urls.values())))
        yield fronts


@pytest.mark.parametrize("kind", ["public_url", "forwarded"])
def test_the_console_logs_in_and_deletes_behind_nginx_with_tls(
    chromium: Chromium, behind_tls: dict[str, Front], kind: str
) -> None:
    front = behind_tls[kind]
    auth = {"Authorization": f"Bearer {front.token}"}
    data = os.urandom(4096)
    stored = httpx.post(
        f"{front.server.url}/v1/artifacts", params={"name": "doomed.bin"}, content=data, headers=auth
    )
    assert stored.status_code == 201
    artifact = stored.json()["id"]
    assert stored.json()["sha256"] == hashlib.sha256(data).hexdigest()
    seen = chromium(
        "consoleDelete", loginUrl=f"{front.url}/console/login", token=front.token, artifactId=artifact
    )
    assert seen["login"] == 303, seen
    assert seen["landed"] == f"{front.url}/console/artifacts"
    assert seen["artifact"] == 200
    assert seen["delete"] == 303
    assert seen["after"] == f"{front.url}/console/artifacts"
    assert seen["cookie"], seen  # the console's session cookie, sent over TLS only
    assert all(cookie["secure"] for cookie in seen["cookie"]), seen["cookie"]
    gone = httpx.get(f"{front.server.url}/v1/artifacts/{artifact}", headers=auth)
    assert gone.status_code == 404

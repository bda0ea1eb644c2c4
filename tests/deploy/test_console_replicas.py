"""Two ``blobstore serve`` replicas with the console on, one PostgreSQL database and one S3 bucket (moto),
behind a round-robin balancer with no stickiness: they agree on the link key and share console sessions
without any setting for it. A form loaded from one replica is posted to the other, a share link made on one
opens on the other, and a token revoked on one ends its link and its session on the other at once."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.fixtures.commands import run_cli
from tests.fixtures.round_robin import round_robin
from tests.fixtures.server import Server, isolated_env, start_server, stop_server
from tests.fixtures.waiting import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.s3]

DEADLINE_SECONDS = 60.0
CSRF = re.compile(r'<meta name="csrf-token" content="([0-9a-f]+)">')
SHARE = re.compile(r'id="share-link" class="copyable" readonly value="([^"]+)"')


def create_token(env: dict[str, str], scopes: str) -> tuple[str, str]:
    done = run_cli(
        ["token", "create", "--namespace", "alpha", "--scopes", scopes, "--json"], isolated_env(env)
    )
    assert done.returncode == 0, done.stderr
    created = json.loads(done.stdout)
    return created["token"], created["id"]


@pytest.fixture
def replicas(
    tmp_path: Path, pg_url: str, s3_storage_url: str, s3_endpoint_url: str
) -> Iterator[tuple[Server, Server, dict[str, str]]]:
    env = {
        "BLOBSTORE_DATABASE_URL": pg_url,
        "BLOBSTORE_STORAGE_URL": s3_storage_url,
        "BLOBSTORE_S3_ENDPOINT_URL": s3_endpoint_url,
        "BLOBSTORE_CONSOLE": "true",
    }
    migrated = run_cli(["migrate"], isolated_env(env))
    assert migrated.returncode == 0, migrated.stderr
    admin, _ = create_token(env, "read,write,admin")
    reader, reader_id = create_token(env, "read")
    tokens = {"admin": admin, "reader": reader, "reader_id": reader_id}
    for name in ("replica-1", "replica-2"):
        (tmp_path / name).mkdir()
    first = start_server(tmp_path / "replica-1", env=env)
    try:
        second = start_server(tmp_path / "replica-2", env=env)
        try:
            yield first, second, tokens
        finally:
            stop_server(second)
    finally:
        stop_server(first)


def port_of(server: Server) -> int:
    return int(server.url.rsplit(":", 1)[1])


def served(replicas: tuple[Server, Server], request_id: str) -> Server:
    """The replica that wrote the access line of ``request_id``."""

    def found() -> Server | None:
        for server in replicas:
            if f'"request_id":"{request_id}"' in server.log_text():
                return server
        return None

    wait_until(lambda: found() is not None, within=DEADLINE_SECONDS, what=f"the access line of {request_id}")
    server = found()
    assert server is not None
    return server


def on(server: Server, url: str, balancer: str) -> str:
    """``url`` of the balancer, sent to ``server`` directly."""
    assert url.startswith(balancer)
    return server.url + url[len(balancer) :]


def test_forms_links_and_revocation_agree_across_replicas_behind_round_robin(
    replicas: tuple[Server, Server, dict[str, str]],
) -> None:
    first, second, tokens = replicas
    both = (first, second)
    admin = {"Authorization": f"Bearer {tokens['admin']}"}
    stored = httpx.post(
        f"{first.url}/v1/artifacts", params={"name": "report.txt"}, content=b"q3", headers=admin
    )
    assert stored.status_code == 201, stored.text
    artifact_id = stored.json()["id"]
    # One connection per request: the balancer hands each to the next replica.
    one_per_request = httpx.Limits(max_keepalive_connections=0)

    with (
        round_robin([port_of(first), port_of(second)]) as balancer,
        httpx.Client(base_url=balancer, limits=one_per_request, timeout=60) as browser,
    ):

        def send(method: str, path: str, request_id: str, **kwargs: object) -> httpx.Response:
            return browser.request(method, path, headers={"X-Request-Id": request_id}, **kwargs)  # type: ignore[arg-type]

        assert send("POST", "/console/login", "login", data={"token": tokens["reader"]}).status_code == 303
        form = send("GET", f"/console/artifacts/{artifact_id}", "form-load")
        assert form.status_code == 200, form.text
        csrf = CSRF.search(form.text)
        assert csrf is not None
        posted = send(
            "POST", f"/console/artifacts/{artifact_id}/share", "form-post", data={"csrf": csrf.group(1)}
        )
        assert posted.status_code == 303, posted.text
        shown = send("GET", posted.headers["location"], "form-shown")
        found = SHARE.search(shown.text)
        assert found is not None, shown.text
        link = html.unescape(found.group(1))
        loaded_on, posted_on = served(both, "form-load"), served(both, "form-post")
        # The form came from one replica and went to the other; the session and its CSRF token are shared.
        assert loaded_on is not posted_on
        assert served(both, "form-shown") is loaded_on

        # The link made on one replica opens on both, and through the balancer.
        for server in both:
            opened = httpx.get(on(server, link, balancer))
            assert opened.status_code == 200, (server.url, opened.text)
            assert opened.content == b"q3"

        # The admin revokes the reader's token on one replica: the link and the session end on the other.
        with httpx.Client(base_url=balancer, limits=one_per_request, timeout=60) as operator:
            assert operator.post("/console/login", data={"token": tokens["admin"]}).status_code == 303
            page = operator.get("/console/operate")
            token = CSRF.search(page.text)
            assert token is not None
            revoked = operator.post(
                f"/console/operate/tokens/{tokens['reader_id']}/revoke",
                data={"csrf": token.group(1)},
                headers={"X-Request-Id": "revoke"},
            )
            assert revoked.status_code == 303, revoked.text
        revoked_on = served(both, "revoke")
        other = second if revoked_on is first else first
        assert httpx.get(on(other, link, balancer)).status_code == 403
        assert httpx.get(on(revoked_on, link, balancer)).status_code == 403
        for _ in both:
            assert send("GET", "/console/artifacts", "after-revoke").status_code == 303

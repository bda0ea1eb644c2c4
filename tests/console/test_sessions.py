"""Console sessions on the server side: the cookie carries a random session id (stored hashed), the CSRF token
is the session's own, Log out deletes the session, two session cookies mean logged out, and a session ends
with its idle or absolute lifetime, or at once when its token is revoked or expires."""

from __future__ import annotations

import hashlib
import re
from datetime import timedelta
from pathlib import Path

import httpx
import sqlalchemy as sa
from fastapi import FastAPI

from blobstore.api import create_app
from blobstore.auth import create_token, split_token
from blobstore.cleanup import run_cleanup
from blobstore.models import Caller, Scope
from blobstore.service import ArtifactService
from tests.console.conftest import BASE, Login, Store, client_for, csrf_of
from tests.fixtures.asgi import app_client
from tests.fixtures.settings import make_settings
from tests.security.conftest import Tenant, issue

COOKIE = "blobstore_console"
SECURE_COOKIE = "__Host-blobstore_console"


def session_cookie(answer: httpx.Response, name: str = COOKIE) -> str:
    for header in answer.headers.get_list("set-cookie"):
        found = re.match(rf"{re.escape(name)}=([^;]*)", header)
        if found and found.group(1) not in ("", '""'):  # not one of the deletions beside it
            return found.group(1)
    raise AssertionError(f"no {name} cookie in {answer.headers.get_list('set-cookie')}")


async def session_rows(service: ArtifactService) -> list[dict[str, object]]:
    async with service.repo.engine.connect() as conn:
        found = await conn.execute(sa.text("SELECT * FROM console_sessions"))
        return [dict(row._mapping) for row in found]


class Later:
    """Moves the service's clock to ``offset`` past the real time, and back to it at the end."""

    def __init__(self, service: ArtifactService) -> None:
        self.service = service
        self.real = service.clock.source

    def at(self, offset: timedelta) -> None:
        real = self.real
        self.service.clock.source = lambda: real() + offset

    def __enter__(self) -> Later:
        return self

    def __exit__(self, *_: object) -> None:
        self.service.clock.source = self.real


async def test_the_cookie_holds_a_random_session_id_stored_only_as_its_hash(
    app: FastAPI, tenant_a: Tenant, service: ArtifactService
) -> None:
    async with client_for(app) as first, client_for(app) as second:
        one = await first.post("/console/login", data={"token": tenant_a.token})
        two = await second.post("/console/login", data={"token": tenant_a.token})
        ids = [session_cookie(one), session_cookie(two)]
        csrf = [await csrf_of(first), await csrf_of(second)]
    assert ids[0] != ids[1]
    for value in ids:
        assert tenant_a.token not in value
        assert len(value) >= 43  # 256 random bits, URL-safe
    rows = await session_rows(service)
    assert len(rows) == 2
    stored = {str(cell) for row in rows for cell in row.values()}
    for value in ids:
        assert value not in stored
        assert hashlib.sha256(value.encode()).hexdigest() in stored
    assert tenant_a.token_id in stored  # the row names its token, never the secret
    parts = split_token(tenant_a.token)
    assert parts is not None
    assert not any(parts[1] in cell for cell in stored)
    # Each session has its own CSRF token; one session's token is refused in the other.
    assert csrf[0] != csrf[1]
    assert len(csrf[0]) == 64


async def test_one_sessions_csrf_token_is_refused_in_another(
    app: FastAPI, login: Login, tenant_a: Tenant, store: Store, service: ArtifactService
) -> None:
    artifact_id = await store(tenant_a, b"keep", "keep.txt")
    async with login(tenant_a) as first, login(tenant_a) as second:
        foreign = await csrf_of(first)
        refused = await second.post(f"/console/artifacts/{artifact_id}/delete", data={"csrf": foreign})
        assert refused.status_code == 403
        bridged = await second.delete(
            f"/console/api/v1/artifacts/{artifact_id}", headers={"X-CSRF-Token": foreign}
        )
        assert bridged.status_code == 403
    assert (await service.get_artifact(Caller("alpha"), artifact_id)).name == "keep.txt"


async def test_a_cookie_replayed_after_log_out_opens_nothing_and_its_csrf_token_deletes_nothing(
    app: FastAPI, login: Login, tenant_a: Tenant, store: Store, service: ArtifactService
) -> None:
    artifact_id = await store(tenant_a, b"not to be deleted", "kept.txt")
    async with login(tenant_a) as browser:
        old_cookie = browser.cookies[COOKIE]
        old_csrf = await csrf_of(browser)
        out = await browser.post("/console/logout", data={"csrf": old_csrf})
        assert out.status_code == 303
    assert await session_rows(service) == []
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as replay:
        replay.cookies.set(COOKIE, old_cookie, domain="127.0.0.1", path="/console")
        page = await replay.get("/console/artifacts")
        assert page.status_code == 303
        assert page.headers["location"].startswith("/console/login")
        for method, path, headers in (
            ("DELETE", f"/console/api/v1/artifacts/{artifact_id}", {"X-CSRF-Token": old_csrf}),
            ("GET", f"/console/api/v1/artifacts/{artifact_id}/content", {}),
            ("GET", "/console/api/v1/artifacts", {}),
        ):
            answer = await replay.request(method, path, headers=headers)
            assert answer.status_code == 401, (method, path, answer.text)
        form = await replay.post(f"/console/artifacts/{artifact_id}/delete", data={"csrf": old_csrf})
        assert form.status_code == 303
        assert form.headers["location"].startswith("/console/login")
    assert (await service.get_artifact(Caller("alpha"), artifact_id)).name == "kept.txt"


async def test_two_session_cookies_mean_logged_out_and_the_login_page_says_why(
    app: FastAPI, login: Login, tenant_a: Tenant, tenant_b: Tenant, store: Store, service: ArtifactService
) -> None:
    artifact_id = await store(tenant_a, b"admin's", "admins.txt")
    async with login(tenant_a) as admin, login(tenant_b) as attacker:
        ours, theirs = admin.cookies[COOKIE], attacker.cookies[COOKIE]
        csrf = await csrf_of(admin)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as tossed:
        # What a browser sends after another port of 127.0.0.1 set its own cookie with path=/: both.
        both = {"Cookie": f"{COOKIE}={ours}; {COOKIE}={theirs}"}
        page = await tossed.get("/console/artifacts", headers=both)
        assert page.status_code == 303
        notice = await tossed.get(page.headers["location"])
        assert 'id="login-notice"' in notice.text
        assert "two console cookies" in notice.text.lower()
        # The answer removes the cookie of our name at path / (the tossed one) as well as ours.
        cleared = [header.lower() for header in page.headers.get_list("set-cookie")]
        assert any("path=/;" in header or header.endswith("path=/") for header in cleared), cleared
        bridged = await tossed.delete(
            f"/console/api/v1/artifacts/{artifact_id}", headers={**both, "X-CSRF-Token": csrf}
        )
        assert bridged.status_code == 401
        upload = await tossed.post(
            "/console/api/v1/uploads", json={"name": "x"}, headers={**both, "X-CSRF-Token": csrf}
        )
        assert upload.status_code == 401
    assert (await service.get_artifact(Caller("alpha"), artifact_id)).name == "admins.txt"
    assert await service.list_artifacts(Caller("beta")) is not None
    assert (await service.list_artifacts(Caller("beta"))).items == []


async def test_revoking_the_token_ends_its_sessions_at_once(
    app: FastAPI, login: Login, tenant_a: Tenant, service: ArtifactService
) -> None:
    async with login(tenant_a) as browser:
        assert (await browser.get("/console/artifacts")).status_code == 200
        # What `blobstore token revoke` does, from another process or replica.
        assert await service.repo.revoke_token(tenant_a.token_id, now=service.clock())
        assert (await browser.get("/console/artifacts")).status_code == 303
        assert (await browser.get("/console/api/v1/artifacts")).status_code == 401
    assert await session_rows(service) == []


async def test_a_session_ends_when_its_token_expires(app: FastAPI, service: ArtifactService) -> None:
    issued = await create_token(
        service.repo,
        namespace="alpha",
        scopes=frozenset({Scope.READ}),
        expires_at=service.clock() + timedelta(minutes=10),
    )
    async with client_for(app) as browser:
        assert (await browser.post("/console/login", data={"token": issued.token})).status_code == 303
        assert (await browser.get("/console/artifacts")).status_code == 200
        [row] = await session_rows(service)
        with Later(service) as later:
            later.at(timedelta(minutes=11))
            assert (await browser.get("/console/artifacts")).status_code == 303
    assert row["token_id"] == issued.record.id


async def test_idle_and_absolute_lifetimes(
    app: FastAPI, login: Login, tenant_a: Tenant, service: ArtifactService
) -> None:
    with Later(service) as later:
        async with login(tenant_a) as browser:
            # Idle: 30 minutes without a request ends it.
            later.at(timedelta(minutes=31))
            assert (await browser.get("/console/artifacts")).status_code == 303
        later.at(timedelta(0))
        async with login(tenant_a) as browser:
            # Used every 25 minutes it lives on, until its absolute lifetime of 12 hours.
            for step in range(1, 30):
                later.at(timedelta(minutes=25 * step))
                expected = 200 if 25 * step < 12 * 60 else 303
                assert (await browser.get("/console/artifacts")).status_code == expected, step


async def test_the_idle_time_is_written_at_most_once_a_minute(
    app: FastAPI, login: Login, tenant_a: Tenant, service: ArtifactService
) -> None:
    with Later(service) as later:
        async with login(tenant_a) as browser:
            [before] = await session_rows(service)
            for _ in range(5):
                assert (await browser.get("/console/artifacts")).status_code == 200
            [unchanged] = await session_rows(service)
            assert unchanged["idle_until"] == before["idle_until"]
            later.at(timedelta(minutes=2))
            assert (await browser.get("/console/artifacts")).status_code == 200
            [touched] = await session_rows(service)
            assert touched["idle_until"] != before["idle_until"]


async def test_cleanup_removes_ended_sessions(
    app: FastAPI, login: Login, tenant_a: Tenant, service: ArtifactService
) -> None:
    async with login(tenant_a):
        pass
    async with login(tenant_a) as browser:
        await csrf_of(browser)
    assert len(await session_rows(service)) == 2
    runtime = app.state.blobstore.runtime
    with Later(service) as later:
        later.at(timedelta(hours=1))
        dry = await run_cleanup(runtime.cleanup, dry_run=True)
        assert dry.step("expire").details.get("console_sessions") == 2
        assert len(await session_rows(service)) == 2
        report = await run_cleanup(runtime.cleanup)
    assert report.step("expire").details.get("console_sessions") == 2
    assert await session_rows(service) == []


async def test_under_https_the_cookie_is_host_prefixed_secure_and_path_root(
    tmp_path: Path, service: ArtifactService
) -> None:
    settings = make_settings(tmp_path, public_url="https://store.example")
    tenant = await issue(service, "alpha")
    async with app_client(create_app(settings, service=service), base_url=BASE) as browser:
        answer = await browser.post("/console/login", data={"token": tenant.token})
        assert answer.status_code == 303
        [header] = answer.headers.get_list("set-cookie")
        assert header.startswith(f"{SECURE_COOKIE}=")
        lowered = header.lower()
        assert "; secure" in lowered
        assert "; path=/;" in lowered or lowered.endswith("; path=/")
        assert "domain=" not in lowered
        assert "httponly" in lowered
        assert "samesite=strict" in lowered
        value = session_cookie(answer, SECURE_COOKIE)
        # The plain name is not read under https: a cookie an http page could set opens nothing.
        plain = await browser.get("/console/artifacts", headers={"Cookie": f"{COOKIE}={value}"})
        assert plain.status_code == 303
        prefixed = await browser.get("/console/artifacts", headers={"Cookie": f"{SECURE_COOKIE}={value}"})
        assert prefixed.status_code == 200

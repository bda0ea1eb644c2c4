"""Share links through the console: made with the CSRF token, fetched without any cookie or token (ranges
too), refused once expired, altered or revoked by rotating the key, and never outliving the token that minted
them: capped at its expiry, refused once it is revoked, and a local-mode link ends with local mode."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlsplit

import httpx
from fastapi import FastAPI

from blobstore.auth import create_token, split_token
from blobstore.config import Settings
from blobstore.models import Scope
from blobstore.service import ArtifactService
from tests.console.conftest import Login, Store, client_for, csrf_of
from tests.security.conftest import Tenant, issue

SHARE = re.compile(r'id="share-link" class="copyable" readonly value="([^"]+)"')


async def make_link(browser: httpx.AsyncClient, artifact_id: str, expires: str = "1h") -> str:
    token = await csrf_of(browser, f"/console/artifacts/{artifact_id}")
    page = await browser.post(
        f"/console/artifacts/{artifact_id}/share",
        data={"csrf": token, "expires": expires},
        follow_redirects=True,
    )
    assert page.status_code == 200, page.text
    found = SHARE.search(page.text)
    assert found is not None
    return html.unescape(found.group(1))


def query_of(link: str) -> dict[str, str]:
    return {key: values[0] for key, values in parse_qs(urlsplit(link).query).items()}


async def test_a_share_link_works_without_a_token_and_with_ranges(
    app: FastAPI, login: Login, tenant_a: Tenant, store: Store
) -> None:
    data = bytes(range(256)) * 40
    artifact_id = await store(tenant_a, data, "table.bin")
    async with login(tenant_a) as browser:
        link = await make_link(browser, artifact_id)
    assert link.startswith("http://127.0.0.1:8420/share/alpha/")
    async with client_for(app) as stranger:
        whole = await stranger.get(link)
        part = await stranger.get(link, headers={"Range": "bytes=10-19"})
    assert whole.status_code == 200
    assert whole.content == data
    assert whole.headers["content-disposition"].startswith("attachment;")
    assert whole.headers["content-security-policy"].startswith("sandbox")
    assert part.status_code == 206
    assert part.content == data[10:20]


async def test_an_expired_or_altered_link_is_refused(
    app: FastAPI, login: Login, tenant_a: Tenant, store: Store, settings: Settings
) -> None:
    first = await store(tenant_a, b"one", "one.txt")
    second = await store(tenant_a, b"two", "two.txt")
    async with login(tenant_a) as browser:
        link = await make_link(browser, first, "1s")
        long_link = await make_link(browser, first, "1h")
        refused = await browser.post(
            f"/console/artifacts/{first}/share",
            data={"csrf": await csrf_of(browser), "expires": "90d"},
        )
        assert refused.status_code == 400
    async with client_for(app) as stranger:
        # Another artifact under the same signature, a later expiry: both refused.
        assert (await stranger.get(long_link.replace(first, second))).status_code == 403
        later = re.sub(r"expires=(\d+)", lambda m: f"expires={int(m.group(1)) + 60}", long_link)
        assert (await stranger.get(later)).status_code == 403
        # Time passes (the service's clock): the short link is refused, the long one still works.
        service = app.state.blobstore.service
        real_clock = service.clock.source
        service.clock.source = lambda: real_clock() + timedelta(seconds=5)
        try:
            answer = await stranger.get(link)
            assert answer.status_code == 403
            assert answer.json()["detail"] == "the link has expired"
            assert (await stranger.get(long_link)).status_code == 200
        finally:
            service.clock.source = real_clock


async def test_rotating_the_key_revokes_every_link(
    app: FastAPI, login: Login, tenant_a: Tenant, store: Store
) -> None:
    artifact_id = await store(tenant_a, b"shared", "shared.txt")
    async with login(tenant_a) as browser:
        link = await make_link(browser, artifact_id)
        async with client_for(app) as stranger:
            assert (await stranger.get(link)).status_code == 200
            token = await csrf_of(browser, "/console/operate")
            assert (await browser.post("/console/operate/link-key", data={"csrf": token})).status_code == 303
            assert (await stranger.get(link)).status_code == 403
        # The page's CSRF token changed with the key; the new one works.
        fresh = await make_link(browser, artifact_id)
        async with client_for(app) as stranger:
            assert (await stranger.get(fresh)).status_code == 200


async def test_a_deleted_artifacts_link_is_not_found(
    app: FastAPI, login: Login, tenant_a: Tenant, store: Store
) -> None:
    artifact_id = await store(tenant_a, b"gone soon", "gone.txt")
    async with login(tenant_a) as browser:
        link = await make_link(browser, artifact_id)
        token = await csrf_of(browser)
        assert (
            await browser.post(f"/console/artifacts/{artifact_id}/delete", data={"csrf": token})
        ).status_code == 303
    async with client_for(app) as stranger:
        assert (await stranger.get(link)).status_code == 404


async def test_a_link_names_its_minting_token_and_stops_working_once_it_is_revoked(
    app: FastAPI, service: ArtifactService, store: Store
) -> None:
    reader = await issue(service, "alpha", frozenset({Scope.READ}))
    artifact_id = await store(await issue(service, "alpha"), b"read by a link", "linked.txt")
    async with client_for(app) as browser:
        assert (await browser.post("/console/login", data={"token": reader.token})).status_code == 303
        link = await make_link(browser, artifact_id, "1d")
    query = query_of(link)
    assert query["by"] == reader.token_id
    # Split by length: the secret's alphabet has `_`, so the text after the last `_` can be one letter.
    parts = split_token(reader.token)
    assert parts is not None
    assert parts[1] not in link
    async with client_for(app) as stranger:
        assert (await stranger.get(link)).status_code == 200
        # `blobstore token revoke`, here or on another replica: the link is refused from then on.
        assert await service.repo.revoke_token(reader.token_id, now=service.clock())
        refused = await stranger.get(link)
        assert refused.status_code == 403
        assert refused.json()["code"] == "forbidden"
        # Naming another token (or none) breaks the signature.
        other = link.replace(f"by={reader.token_id}", "by=local")
        assert (await stranger.get(other)).status_code == 403


async def test_a_link_never_outlives_its_token(app: FastAPI, service: ArtifactService, store: Store) -> None:
    expires = service.clock() + timedelta(minutes=45)
    issued = await create_token(
        service.repo, namespace="alpha", scopes=frozenset({Scope.READ}), expires_at=expires
    )
    artifact_id = await store(await issue(service, "alpha"), b"short-lived", "short.txt")
    async with client_for(app) as browser:
        assert (await browser.post("/console/login", data={"token": issued.token})).status_code == 303
        token = await csrf_of(browser, f"/console/artifacts/{artifact_id}")
        page = await browser.post(
            f"/console/artifacts/{artifact_id}/share",
            data={"csrf": token, "expires": "30d"},
            follow_redirects=True,
        )
    found = SHARE.search(page.text)
    assert found is not None
    link = html.unescape(found.group(1))
    assert datetime.fromtimestamp(int(query_of(link)["expires"]), UTC) <= expires
    assert 'id="share-capped"' in page.text
    async with client_for(app) as stranger:
        assert (await stranger.get(link)).status_code == 200
        real = service.clock.source
        service.clock.source = lambda: real() + timedelta(minutes=46)
        try:
            assert (await stranger.get(link)).status_code == 403
        finally:
            service.clock.source = real


async def test_a_link_made_in_local_mode_ends_with_local_mode(app: FastAPI, service: ArtifactService) -> None:
    async with client_for(app) as browser:
        stored = await browser.post("/v1/artifacts", params={"name": "local.txt"}, content=b"local bytes")
        assert stored.status_code == 201
        artifact_id = stored.json()["id"]
        assert (await browser.post("/console/login", data={"local": "1"})).status_code == 303
        link = await make_link(browser, artifact_id)
    assert query_of(link)["by"] == "local"
    async with client_for(app) as stranger:
        assert (await stranger.get(link)).status_code == 200
        # The first token ends local mode, its console sessions and the links minted in it.
        await issue(service, "alpha")
        assert (await stranger.get(link)).status_code == 403

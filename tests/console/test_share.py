"""Share links through the console: made with the CSRF token, fetched without any cookie or token (ranges
too), refused once expired, altered or revoked by rotating the key."""

from __future__ import annotations

import html
import re
from datetime import timedelta

import httpx
from fastapi import FastAPI

from blobstore.config import Settings
from tests.console.conftest import Login, Store, client_for, csrf_of
from tests.security.conftest import Tenant

SHARE = re.compile(r'id="share-link" class="copyable" readonly value="([^"]+)"')


async def make_link(browser: httpx.AsyncClient, artifact_id: str, expires: str = "1h") -> str:
    token = await csrf_of(browser, f"/console/artifacts/{artifact_id}")
    page = await browser.post(
        f"/console/artifacts/{artifact_id}/share", data={"csrf": token, "expires": expires}
    )
    assert page.status_code == 200, page.text
    found = SHARE.search(page.text)
    assert found is not None
    return html.unescape(found.group(1))


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
        real_clock = service.clock
        service.clock = lambda: real_clock() + timedelta(seconds=5)
        try:
            answer = await stranger.get(link)
            assert answer.status_code == 403
            assert answer.json()["detail"] == "the link has expired"
            assert (await stranger.get(long_link)).status_code == 200
        finally:
            service.clock = real_clock


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

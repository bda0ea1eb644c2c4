"""The console's pages over a real service: login and its cookie, the security headers, CSRF on every change,
escaping of names and metadata, namespaces kept apart, browsing with filters and keyset pages, operate."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from PIL import Image

from blobstore.api import create_app
from blobstore.models import Caller, Scope
from blobstore.service import ArtifactService
from tests.console.conftest import BASE, Login, Store, client_for, csrf_of
from tests.fixtures.asgi import app_client
from tests.fixtures.png_chunks import tiny_image_png
from tests.fixtures.settings import make_settings
from tests.security.conftest import Tenant, issue

HOSTILE = "<img src=x onerror=alert(1)>.svg"
SVG = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'


async def _chunks(data: bytes) -> AsyncIterator[bytes]:
    yield data


def png(width: int = 400, height: int = 300) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (200, 40, 40)).save(out, format="PNG")
    return out.getvalue()


async def test_login_sets_an_httponly_strict_cookie_scoped_to_the_console(
    app: FastAPI, tenant_a: Tenant
) -> None:
    async with client_for(app) as browser:
        answer = await browser.post("/console/login", data={"token": tenant_a.token})
    assert answer.status_code == 303
    assert answer.headers["location"] == "/console/artifacts"
    [cleared, cookie] = [header.lower() for header in answer.headers.get_list("set-cookie")]
    assert cookie.startswith("blobstore_console=")
    assert "httponly" in cookie
    assert "samesite=strict" in cookie
    assert "path=/console" in cookie
    assert "secure" not in cookie  # plain http here; https sets it
    # The one a page on another port of this host may have set at the root is cleared.
    assert cleared.startswith('blobstore_console=""')
    assert "path=/;" in cleared
    assert "max-age=0" in cleared


async def test_the_cookie_is_secure_behind_an_https_public_url(
    tmp_path: Path, service: ArtifactService
) -> None:
    settings = make_settings(tmp_path, public_url="https://store.example")
    tenant = await issue(service, "alpha")
    async with app_client(create_app(settings, service=service), base_url=BASE) as browser:
        answer = await browser.post("/console/login", data={"token": tenant.token})
    assert answer.status_code == 303
    assert "secure" in answer.headers["set-cookie"].lower()


async def test_a_wrong_token_gets_the_form_again_and_no_cookie(app: FastAPI, tenant_a: Tenant) -> None:
    async with client_for(app) as browser:
        wrong = tenant_a.token[:-1] + ("B" if tenant_a.token.endswith("A") else "A")
        answer = await browser.post("/console/login", data={"token": wrong})
        assert answer.status_code == 303
        assert answer.headers["location"] == "/console/login?failed=unknown"
        assert "set-cookie" not in answer.headers
        form = await browser.get(answer.headers["location"])
        assert 'id="login-error">No such token.<' in form.text
        page = await browser.get("/console/artifacts")
    assert page.status_code == 303
    assert page.headers["location"] == "/console/login"


async def test_local_mode_offers_a_login_without_token_until_a_token_exists(
    app: FastAPI, service: ArtifactService
) -> None:
    async with client_for(app) as browser:
        assert 'id="login-local"' in (await browser.get("/console/login")).text
        assert (await browser.post("/console/login", data={"local": "1"})).status_code == 303
        assert (await browser.get("/console/artifacts")).status_code == 200
        await issue(service, "alpha")
        # The local session ends with local mode.
        assert (await browser.get("/console/artifacts")).status_code == 303
        assert 'id="login-local"' not in (await browser.get("/console/login")).text


async def test_pages_carry_a_strict_policy_and_nosniff(login: Login, tenant_a: Tenant) -> None:
    async with login(tenant_a) as browser:
        for path in (
            "/console/artifacts",
            "/console/upload",
            "/console/operate",
            "/console/static/console.js",
        ):
            answer = await browser.get(path)
            assert answer.status_code == 200, path
            policy = answer.headers["content-security-policy"]
            assert "script-src 'self'" in policy
            assert "unsafe-inline" not in policy
            assert "unsafe-eval" not in policy
            assert "frame-ancestors 'none'" in policy
            assert answer.headers["x-content-type-options"] == "nosniff"
        page = await browser.get("/console/artifacts")
    assert "<script>" not in page.text
    assert " style=" not in page.text
    assert page.headers["cache-control"] == "no-store"


async def test_every_change_without_the_csrf_token_is_refused(
    login: Login, tenant_a: Tenant, store: Store, service: ArtifactService
) -> None:
    artifact_id = await store(tenant_a, b"keep me", "keep.txt")
    async with login(tenant_a) as browser:
        token = await csrf_of(browser)
        for path in (
            f"/console/artifacts/{artifact_id}/delete",
            f"/console/artifacts/{artifact_id}/pin",
            f"/console/artifacts/{artifact_id}/share",
            "/console/operate/cleanup",
            "/console/logout",
        ):
            for form in ({}, {"csrf": "0" * 64}, {"csrf": "é" * 64}):
                answer = await browser.post(path, data=form)
                assert answer.status_code == 403, (path, form)
                assert answer.json()["code"] == "forbidden"
        # The right token, from another site: refused too.
        foreign = await browser.post(
            f"/console/artifacts/{artifact_id}/delete",
            data={"csrf": token},
            headers={"Origin": "https://evil.example"},
        )
        assert (foreign.status_code, foreign.json()["code"]) == (403, "cross_origin_refused")
        # Through the bridge to the API: a change needs the header.
        bridged = await browser.post("/console/api/v1/uploads", json={"name": "x"})
        assert bridged.status_code == 403
        allowed = await browser.post(
            "/console/api/v1/uploads", json={"name": "x"}, headers={"X-CSRF-Token": token}
        )
        assert allowed.status_code == 201
        # A login posted from another site is refused before any token is looked at.
        foreign_login = await browser.post(
            "/console/login", data={"token": tenant_a.token}, headers={"Origin": "https://evil.example"}
        )
        assert (foreign_login.status_code, foreign_login.json()["code"]) == (403, "cross_origin_refused")
        # Nothing was deleted, pinned or shared.
        artifact = await service.get_artifact(Caller("alpha"), artifact_id)
        assert not artifact.pinned
        done = await browser.post(f"/console/artifacts/{artifact_id}/delete", data={"csrf": token})
        assert done.status_code == 303
    with pytest.raises(Exception, match="not found"):
        await service.get_artifact(Caller("alpha"), artifact_id)


async def test_pin_keeps_an_artifact_without_expiry_and_unpin_gives_it_back(
    login: Login, tenant_a: Tenant, store: Store, service: ArtifactService
) -> None:
    artifact_id = await store(tenant_a, b"keep", "keep.txt", ttl_seconds="60")
    async with login(tenant_a) as browser:
        token = await csrf_of(browser)
        pinned = await browser.post(
            f"/console/artifacts/{artifact_id}/pin", data={"csrf": token, "pinned": "1"}
        )
        assert pinned.status_code == 303
        page = await browser.get(f"/console/artifacts/{artifact_id}")
        assert "never (pinned)" in page.text
        assert 'id="pin">Unpin<' in page.text
        assert (await service.get_artifact(Caller("alpha"), artifact_id)).pinned
        await browser.post(f"/console/artifacts/{artifact_id}/pin", data={"csrf": token, "pinned": "0"})
    assert not (await service.get_artifact(Caller("alpha"), artifact_id)).pinned


async def test_names_and_metadata_are_escaped_everywhere(
    login: Login, tenant_a: Tenant, service: ArtifactService
) -> None:
    caller = Caller("alpha", actor=tenant_a.token_id)
    artifact = await service.create_artifact(
        caller,
        _chunks(SVG),
        name=HOSTILE,
        mime_type="image/svg+xml",
        metadata={"tool": "<script>alert(2)</script>", "upstream": '"><b>x</b>'},
    )
    async with login(tenant_a) as browser:
        listing = await browser.get("/console/artifacts")
        page = await browser.get(f"/console/artifacts/{artifact.id}")
    for html in (listing.text, page.text):
        assert "<img src=x" not in html
        assert "<script>alert" not in html
        assert '"><b>x</b>' not in html
    assert "&lt;img src=x onerror=alert(1)&gt;.svg" in listing.text
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in page.text
    # The SVG is shown as its source, escaped, never as a document or an image of the console.
    assert 'data-kind="text"' in page.text
    assert "&lt;svg" in page.text
    assert f"/console/artifacts/{artifact.id}/thumbnail" not in listing.text


async def test_the_bytes_are_never_rendered_in_the_consoles_origin(
    login: Login, tenant_a: Tenant, store: Store
) -> None:
    artifact_id = await store(tenant_a, SVG, HOSTILE, mime_type="image/svg+xml")
    async with login(tenant_a) as browser:
        answer = await browser.get(f"/console/api/v1/artifacts/{artifact_id}/content")
    assert answer.status_code == 200
    assert answer.headers["content-disposition"].startswith("attachment;")
    assert answer.headers["content-security-policy"].startswith("sandbox")
    assert answer.headers["x-content-type-options"] == "nosniff"


async def test_a_foreign_namespace_sees_nothing_of_another(
    login: Login, tenant_a: Tenant, tenant_b: Tenant, store: Store
) -> None:
    artifact_id = await store(tenant_a, png(), "alpha-only.png")
    async with login(tenant_b) as browser:
        listing = await browser.get("/console/artifacts")
        assert "alpha-only.png" not in listing.text
        assert 'id="no-artifacts"' in listing.text
        assert (await browser.get("/console/artifacts", params={"ns": "alpha"})).text.count("alpha-only") == 0
        for path in (
            f"/console/artifacts/{artifact_id}",
            f"/console/artifacts/{artifact_id}/thumbnail",
            f"/console/artifacts/{artifact_id}/twins",
            f"/console/artifacts/{artifact_id}/verify",
            f"/console/api/v1/artifacts/{artifact_id}/content",
        ):
            assert (await browser.get(path)).status_code == 404, path
        # The operate page is for admins; beta's token has no admin scope.
        assert (await browser.get("/console/operate")).status_code == 403


async def test_browse_filters_and_pages_newest_first(
    login: Login, tenant_a: Tenant, service: ArtifactService, app: FastAPI
) -> None:
    caller = Caller("alpha", actor=tenant_a.token_id)
    for index in range(60):
        await service.create_artifact(caller, _chunks(f"note {index}".encode()), name=f"note-{index:02}.txt")
    offloaded = await service.create_artifact(
        caller,
        _chunks(b'{"rows": [1, 2, 3]}'),
        name="result.json",
        mime_type="application/json",
        metadata={"source": "proxy", "upstream": "fs", "tool": "read_file"},
    )
    async with login(tenant_a) as browser:
        first = await browser.get("/console/artifacts")
        names = re.findall(r">(note-\d\d\.txt|result\.json)</a>", first.text)
        assert names[:3] == ["result.json", "note-59.txt", "note-58.txt"]
        assert len(names) == 50
        older = re.search(r'id="next-page" href="([^"]+)"', first.text)
        assert older is not None
        second = await browser.get(older.group(1).replace("&amp;", "&"))
        rest = re.findall(r">(note-\d\d\.txt)</a>", second.text)
        assert rest[0] == "note-10.txt"
        assert rest[-1] == "note-00.txt"
        assert len(rest) == 11
        assert 'id="next-page"' not in second.text

        by_tool = await browser.get("/console/artifacts", params={"upstream": "fs", "tool": "read_file"})
        assert re.findall(r">([\w.-]+)</a></td>|>([\w.-]+)</a><span", by_tool.text)
        assert "result.json" in by_tool.text
        assert "note-01.txt" not in by_tool.text
        assert "result.json" in (await browser.get("/console/artifacts", params={"mime": "application"})).text
        by_prefix = await browser.get("/console/artifacts", params={"prefix": "note-0"})
        assert len(re.findall(r">note-0\d\.txt</a>", by_prefix.text)) == 10
        by_sha = await browser.get("/console/artifacts", params={"q": offloaded.sha256[:12]})
        assert "result.json" in by_sha.text
        assert "note-" not in by_sha.text
        by_name = await browser.get("/console/artifacts", params={"q": "ote-4"})
        assert len(re.findall(r">note-4\d\.txt</a>", by_name.text)) == 10
        # A LIKE wildcard in the filter is a character, not a pattern.
        assert 'id="no-artifacts"' in (await browser.get("/console/artifacts", params={"prefix": "%"})).text

        page = await browser.get(f"/console/artifacts/{offloaded.id}")
        assert "&#34;rows&#34;: [" in page.text  # the JSON head, pretty-printed
        assert offloaded.uri in page.text


async def test_an_image_gets_a_bounded_cached_thumbnail(login: Login, tenant_a: Tenant, store: Store) -> None:
    artifact_id = await store(tenant_a, png(1200, 600), "wide.png")
    async with login(tenant_a) as browser:
        small = await browser.get(f"/console/artifacts/{artifact_id}/thumbnail")
        again = await browser.get(f"/console/artifacts/{artifact_id}/thumbnail")
        large = await browser.get(f"/console/artifacts/{artifact_id}/thumbnail", params={"edge": 1024})
        odd = await browser.get(f"/console/artifacts/{artifact_id}/thumbnail", params={"edge": 7})
    assert small.status_code == 200
    assert small.headers["content-type"] == "image/jpeg"
    assert Image.open(io.BytesIO(small.content)).size == (160, 80)
    assert Image.open(io.BytesIO(large.content)).size == (1024, 512)
    assert again.content == small.content
    assert odd.status_code == 400


async def test_an_image_browsers_show_gets_its_thumbnail_and_preview(
    login: Login, tenant_a: Tenant, store: Store
) -> None:
    # server-everything's tiny image: its iCCP chunk fails its CRC, which browsers drop.
    artifact_id = await store(tenant_a, tiny_image_png(), "tiny.png", mime_type="image/png")
    async with login(tenant_a) as browser:
        page = await browser.get(f"/console/artifacts/{artifact_id}")
        preview = await browser.get(f"/console/artifacts/{artifact_id}/thumbnail", params={"edge": 1024})
        thumbnail = await browser.get(f"/console/artifacts/{artifact_id}/thumbnail")
    assert f'src="/console/artifacts/{artifact_id}/thumbnail?edge=1024"' in page.text
    for answer in (preview, thumbnail):
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"] in {"image/png", "image/jpeg"}
        assert Image.open(io.BytesIO(answer.content)).size == (20, 20)


async def test_an_image_bomb_gets_no_thumbnail(login: Login, tenant_a: Tenant, store: Store) -> None:
    # A PNG whose header claims 20000 x 20000 pixels, far past the decode limit, in a few hundred bytes.
    out = io.BytesIO()
    Image.new("1", (20000, 20000)).save(out, format="PNG", optimize=True)
    artifact_id = await store(tenant_a, out.getvalue(), "bomb.png", mime_type="image/png")
    async with login(tenant_a) as browser:
        answer = await browser.get(f"/console/artifacts/{artifact_id}/thumbnail")
    assert answer.status_code == 404
    assert answer.json()["code"] == "not_found"


async def test_operate_shows_usage_and_runs_cleanup_as_a_dry_run_first(
    login: Login, tenant_a: Tenant, store: Store
) -> None:
    await store(tenant_a, b"same bytes", "one.txt")
    await store(tenant_a, b"same bytes", "two.txt")
    async with login(tenant_a) as browser:
        opened = await browser.post(
            "/console/api/v1/uploads",
            json={"name": "half.bin"},
            headers={"X-CSRF-Token": await csrf_of(browser)},
        )
        upload_id = opened.json()["upload_id"]
        page = await browser.get("/console/operate")
        assert page.status_code == 200
        open_uploads = re.search(r'id="open-uploads">.*?</table>', page.text, re.S)
        assert open_uploads is not None
        assert upload_id in open_uploads.group(0)
        assert "half.bin" in open_uploads.group(0)
        usage = re.search(r'<table class="list" id="usage">.*?</table>', page.text, re.S)
        assert usage is not None
        assert re.search(
            r"<td>alpha</td><td class=\"num\">2</td><td class=\"num\">20 B</td>"
            r"<td class=\"num\">10 B</td>",
            usage.group(0),
        )
        assert tenant_a.token_id in page.text
        assert tenant_a.token not in page.text
        token = await csrf_of(browser, "/console/operate")
        dry = await browser.post("/console/operate/cleanup", data={"csrf": token}, follow_redirects=True)
        assert dry.status_code == 200
        assert "Dry run: would free" in dry.text
        assert 'id="cleanup-report"' in dry.text
        run = await browser.post(
            "/console/operate/cleanup", data={"csrf": token, "run": "1"}, follow_redirects=True
        )
        assert run.status_code == 200
        assert "Freed" in run.text


async def test_revoking_a_token_in_operate_ends_its_console_session(
    login: Login, tenant_a: Tenant, tenant_b: Tenant
) -> None:
    async with login(tenant_a) as admin, login(tenant_b) as other:
        assert (await other.get("/console/artifacts")).status_code == 200
        token = await csrf_of(admin, "/console/operate")
        revoked = await admin.post(
            f"/console/operate/tokens/{tenant_b.token_id}/revoke", data={"csrf": token}
        )
        assert revoked.status_code == 303
        assert (await other.get("/console/artifacts")).status_code == 303


@pytest.mark.parametrize(
    ("overrides", "served"),
    [
        ({}, True),
        ({"host": "0.0.0.0"}, False),
        ({"host": "0.0.0.0", "console": True}, True),
        ({"console": False}, False),
    ],
)
async def test_the_console_is_on_by_default_on_loopback_only(
    tmp_path: Path, overrides: dict[str, Any], served: bool
) -> None:
    settings = make_settings(tmp_path, **overrides)
    assert settings.console_enabled is served
    async with app_client(create_app(settings), base_url=BASE) as http:
        answer = await http.get("/console/login")
    assert answer.status_code == (200 if served else 404)


async def test_a_read_only_token_browses_but_cannot_upload(app: FastAPI, service: ArtifactService) -> None:
    reader = await issue(service, "alpha", frozenset({Scope.READ}))
    async with client_for(app) as browser:
        assert (await browser.post("/console/login", data={"token": reader.token})).status_code == 303
        assert (await browser.get("/console/artifacts")).status_code == 200
        assert (await browser.get("/console/upload")).status_code == 403
        # A browser's navigation gets the refusal as a page (same status and code), a script the problem.
        page = await browser.get("/console/upload", headers={"Accept": "text/html,*/*;q=0.8"})
        assert page.status_code == 403
        assert page.headers["content-type"].startswith("text/html")
        assert 'id="error-code" data-status="403">403 · forbidden<' in page.text
        assert "script-src 'self'" in page.headers["content-security-policy"]
        missing = await browser.get("/console/artifacts/a_nothere", headers={"Accept": "text/html"})
        assert missing.status_code == 404
        assert "404 · not_found" in missing.text
        assert (await browser.get("/console/artifacts/a_nothere")).json()["code"] == "not_found"
        assert 'href="/console/upload"' not in (await browser.get("/console/artifacts")).text


def test_base_is_a_loopback_origin() -> None:
    assert httpx.URL(BASE).host == "127.0.0.1"


async def test_a_bridged_request_is_logged_with_its_api_route_and_no_secrets(
    login: Login,
    tenant_a: Tenant,
    store: Store,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    artifact_id = await store(tenant_a, b"0123456789", "digits.txt")
    access = logging.getLogger("blobstore.access")
    monkeypatch.setattr(access, "propagate", True)
    monkeypatch.setattr(access, "disabled", False)
    caplog.set_level(logging.DEBUG, logger="blobstore.access")
    async with login(tenant_a) as browser:
        ranged = await browser.get(
            f"/console/api/v1/artifacts/{artifact_id}/content", headers={"Range": "bytes=2-4"}
        )
        link_page = await browser.post(
            f"/console/artifacts/{artifact_id}/share",
            data={"csrf": await csrf_of(browser), "expires": "1h"},
            follow_redirects=True,
        )
    assert ranged.status_code == 206
    assert ranged.content == b"234"
    entries = [
        json.loads(record.getMessage()) for record in caplog.records if record.name == "blobstore.access"
    ]
    [read] = [entry for entry in entries if entry["path"].endswith("/content")]
    assert read["path"] == f"/console/api/v1/artifacts/{artifact_id}/content"
    assert read["route"] == "/v1/artifacts/{artifact_id}/content"
    assert read["status"] == 206
    signature = re.search(r"sig=([A-Za-z0-9_-]+)", link_page.text)
    assert signature is not None
    for secret in (tenant_a.token, signature.group(1)):
        assert secret not in caplog.text

"""The console's flows and words: every POST answers with a redirect (POST/redirect/GET) whose page shows the
outcome once, the integrity check and the counts say what they mean, and byte counters read as sizes."""

from __future__ import annotations

import re

from fastapi import FastAPI

from blobstore.service import ArtifactService
from tests.console.conftest import Login, Store, client_for, csrf_of
from tests.security.conftest import Tenant, issue

SIZE = re.compile(r"^\d+(\.\d)? (B|KiB|MiB|GiB|TiB)$")


def headline(page: str) -> dict[str, str]:
    table = re.search(r'id="headline">(.*?)</table>', page, re.S)
    assert table is not None
    cells = re.findall(r"<th>([^<]+)</th><td[^>]*>([^<]*)</td>", table.group(1))
    return {name: value.strip() for name, value in cells}


async def test_run_cleanup_redirects_and_its_report_is_shown_once(login: Login, tenant_a: Tenant) -> None:
    async with login(tenant_a) as browser:
        token = await csrf_of(browser, "/console/operate")
        for form, words in (({"csrf": token}, "Dry run: would free"), ({"csrf": token, "run": "1"}, "Freed")):
            answer = await browser.post("/console/operate/cleanup", data=form)
            assert answer.status_code == 303
            location = answer.headers["location"]
            assert location.startswith("/console/operate")
            assert token not in location
            page = await browser.get(location)
            assert page.status_code == 200
            assert words in page.text
            assert 'id="cleanup-report"' in page.text
            # A reload is a GET of the same page: nothing runs, and the outcome is not shown twice.
            again = await browser.get(location)
            assert 'id="cleanup-summary"' not in again.text


async def test_every_change_answers_with_a_see_other(
    app: FastAPI, login: Login, tenant_a: Tenant, tenant_b: Tenant, store: Store
) -> None:
    artifact_id = await store(tenant_a, b"pinned, shared, deleted", "flow.txt")
    async with login(tenant_a) as browser:
        token = await csrf_of(browser)
        share = await browser.post(
            f"/console/artifacts/{artifact_id}/share", data={"csrf": token, "expires": "1h"}
        )
        assert share.status_code == 303
        assert share.headers["location"] == f"/console/artifacts/{artifact_id}"
        assert "sig=" not in share.headers["location"]
        shown = await browser.get(share.headers["location"])
        assert 'id="share-link"' in shown.text
        assert 'id="share-link"' not in (await browser.get(share.headers["location"])).text
        for path, form in (
            (f"/console/artifacts/{artifact_id}/pin", {"pinned": "1"}),
            ("/console/operate/link-key", {}),
            (f"/console/operate/tokens/{tenant_b.token_id}/revoke", {}),
            (f"/console/artifacts/{artifact_id}/delete", {}),
            ("/console/logout", {}),
        ):
            answer = await browser.post(path, data={"csrf": token, **form})
            assert answer.status_code == 303, (path, answer.text)
    async with client_for(app) as fresh:
        failed = await fresh.post("/console/login", data={"token": "bst_wrong"})
        assert failed.status_code == 303
        assert failed.headers["location"].startswith("/console/login?")
        assert "bst_wrong" not in failed.headers["location"]
        page = await fresh.get(failed.headers["location"])
        assert 'id="login-error"' in page.text


async def test_verify_says_how_many_blocks_of_what_size(login: Login, tenant_a: Tenant, store: Store) -> None:
    artifact_id = await store(tenant_a, bytes(10_000), "zeros.bin")
    async with login(tenant_a) as browser:
        answer = await browser.get(f"/console/artifacts/{artifact_id}/verify")
    body = answer.json()
    assert body["blocks_verified"] == 3
    assert body["sha256_matches"] is True
    # The test settings' blocks are 4 KiB: three of them, the last one short.
    assert body["summary"] == "3 blocks of 4 KiB, each checked against its XXH3-128; SHA-256 matches"


async def test_an_upload_of_known_content_names_the_earlier_artifact(
    login: Login, tenant_a: Tenant, store: Store
) -> None:
    first = await store(tenant_a, b"the same bytes twice", "first.txt")
    second = await store(tenant_a, b"the same bytes twice", "second.txt")
    async with login(tenant_a) as browser:
        twins = (await browser.get(f"/console/artifacts/{second}/twins")).json()
    assert twins["same_content"] == [{"id": first, "name": "first.txt"}]


async def test_operate_explains_blobs_beside_artifacts_and_shows_sizes_for_byte_counters(
    login: Login, tenant_a: Tenant, store: Store, service: ArtifactService
) -> None:
    await store(tenant_a, b"twice", "one.txt")
    await store(tenant_a, b"twice", "two.txt")
    await store(await issue(service, "beta"), b"twice", "three.txt")
    async with login(tenant_a) as browser:
        page = (await browser.get("/console/operate")).text
    legend = re.search(r'id="count-legend">(.*?)</p>', page, re.S)
    assert legend is not None
    words = legend.group(1)
    assert "artifact" in words
    assert "blob" in words
    assert "once" in words  # one blob per content, however many artifacts name it
    counts = headline(page)
    assert counts["artifacts"] == "3"
    assert counts["blobs"] == "1"
    for name in ("bytes received", "bytes sent", "bytes (logical)", "bytes stored"):
        assert SIZE.match(counts[name]), (name, counts[name])

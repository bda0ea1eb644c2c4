"""On S3 with direct downloads on, a console share link is a presigned S3 URL for the chosen lifetime: it
serves the exact bytes to a client without any token, straight from the storage."""

from __future__ import annotations

import html
import re
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from fastapi import FastAPI

from tests.console.conftest import BASE, CSRF
from tests.presign.conftest import app, s3_place, settings, storage_http  # noqa: F401 - their fixtures

pytestmark = pytest.mark.s3

SHARE = re.compile(r'id="share-link" class="copyable" readonly value="([^"]+)"')


async def test_a_share_link_on_s3_is_a_presigned_url_of_the_chosen_lifetime(
    app: FastAPI,  # noqa: F811 - the presign suite's app, over S3
    storage_http: httpx.AsyncClient,  # noqa: F811
) -> None:
    data = b"bytes straight from the bucket " * 1000
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as browser:
        stored = await browser.post("/v1/artifacts", params={"name": "bucket.bin"}, content=data)
        assert stored.status_code == 201
        artifact_id = stored.json()["id"]
        assert (await browser.post("/console/login", data={"local": "1"})).status_code == 303
        page = await browser.get(f"/console/artifacts/{artifact_id}")
        csrf = CSRF.search(page.text)
        assert csrf is not None
        shared = await browser.post(
            f"/console/artifacts/{artifact_id}/share",
            data={"csrf": csrf.group(1), "expires": "2h"},
            follow_redirects=True,
        )
    found = SHARE.search(shared.text)
    assert found is not None, shared.text
    link = html.unescape(found.group(1))
    assert not link.startswith(BASE)  # the storage's URL, not this server's
    query = {key.lower(): value for key, value in parse_qs(urlsplit(link).query).items()}
    assert query["x-amz-expires"] == ["7200"]
    served = await storage_http.get(link)
    assert served.status_code == 200
    assert served.content == data

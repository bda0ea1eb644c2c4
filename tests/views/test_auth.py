"""Views answer only the artifact's own namespace, with a read token, as content reads do."""

from __future__ import annotations

import httpx

from blobstore.models import Scope
from blobstore.service import ArtifactService
from tests.security.conftest import (  # noqa: F401 (the fixtures these tests use)
    app,
    http,
    issue,
    running,
    service,
    settings,
)
from tests.views import media


async def test_views_need_a_read_token_of_the_artifacts_namespace(
    http: httpx.AsyncClient,  # noqa: F811
    service: ArtifactService,  # noqa: F811
) -> None:
    owner = await issue(service, "alpha")
    stranger = await issue(service, "beta")
    writer = await issue(service, "alpha", frozenset({Scope.WRITE}))
    stored = await http.post(
        "/v1/artifacts", params={"name": "r.pdf"}, content=media.text_pdf(2), headers=owner.headers
    )
    assert stored.status_code == 201
    path = f"/v1/artifacts/{stored.json()['id']}/pages/2.txt"
    anonymous = await http.get(path)
    foreign = await http.get(path, headers=stranger.headers)
    unscoped = await http.get(path, headers=writer.headers)
    allowed = await http.get(path, headers=owner.headers)
    assert (anonymous.status_code, anonymous.json()["code"]) == (401, "unauthorized")
    assert (foreign.status_code, foreign.json()["code"]) == (404, "not_found")
    assert (unscoped.status_code, unscoped.json()["code"]) == (403, "forbidden")
    assert allowed.status_code == 200
    assert media.marker(2) in allowed.text

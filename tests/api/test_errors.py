"""The error table and problem+json answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import APIRouter

from blobstore.api import create_app
from blobstore.api.errors import STATUS_BY_CODE, error_response
from blobstore.config import Settings
from blobstore.errors import Forbidden, RangeNotSatisfiable, Unauthorized, all_codes
from blobstore.service import ArtifactService
from tests.fixtures.problems import problem


def test_every_catalogue_code_has_a_status() -> None:
    assert set(all_codes()) <= set(STATUS_BY_CODE)
    assert set(STATUS_BY_CODE) <= set(all_codes()), "the table maps a code the catalogue does not have"


def test_auth_errors_are_mapped_already() -> None:
    assert error_response(Unauthorized()).status_code == 401
    assert error_response(Unauthorized()).headers["www-authenticate"].startswith("Bearer")
    assert error_response(Forbidden()).status_code == 403


def test_416_problem_carries_an_unsatisfied_content_range() -> None:
    response = error_response(RangeNotSatisfiable(size=42))
    assert response.status_code == 416
    assert response.headers["content-range"] == "bytes */42"


@pytest.fixture
async def failing_client(settings: Settings, service: ArtifactService) -> Any:
    app = create_app(settings, service=service)
    router = APIRouter()

    @router.get("/boom")
    async def boom() -> None:
        raise RuntimeError("secret detail /etc/passwd")

    app.include_router(router)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http,
    ):
        yield http


async def test_unknown_exceptions_are_500_internal_without_their_text(
    failing_client: httpx.AsyncClient,
) -> None:
    response = await failing_client.get("/boom")
    assert problem(response, 500, "internal") == {
        "type": "urn:blobstore:problem:internal",
        "title": "internal error",
        "status": 500,
        "code": "internal",
        "request_id": response.headers["x-request-id"],
    }
    assert "secret" not in response.text


async def test_unknown_route_is_a_404_problem(client: httpx.AsyncClient) -> None:
    problem(await client.get("/nope"), 404, "not_found")


async def test_validation_errors_are_invalid_request_problems_without_the_input(
    client: httpx.AsyncClient,
) -> None:
    response = await client.get("/v1/artifacts", params={"limit": "secret-value"})
    body = problem(response, 400, "invalid_request")
    assert body["errors"][0]["loc"] == ["query", "limit"]
    assert "secret-value" not in response.text


async def test_malformed_ids_are_not_found(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/artifacts/..%2F..%2Fetc")
    assert response.status_code == 404


async def test_health_and_readiness(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    ready = await client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {"status": "ok", "checks": {"database": "ok", "storage": "ok"}}


async def test_readiness_fails_when_the_database_is_gone(
    client: httpx.AsyncClient, service: ArtifactService, tmp_path: Path
) -> None:
    await service.repo.close()
    # Point the service at a database file that is not a database. (A path that cannot be opened at all makes
    # aiosqlite's worker thread outlive the event loop, which is a different failure than the one shown here.)
    from blobstore.metadata.repository import MetadataRepository

    broken = tmp_path / "broken.sqlite3"
    broken.write_bytes(b"this is not a database" * 100)
    service.repo = await MetadataRepository.open(f"sqlite+aiosqlite:///{broken}")
    ready = await client.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["checks"]["database"] == "storage_unavailable"
    await service.repo.close()


async def test_openapi_and_docs_are_served(client: httpx.AsyncClient) -> None:
    spec = (await client.get("/openapi.json")).json()
    assert "/v1/uploads/{upload_id}/chunks/{index}" in spec["paths"]
    assert "requestBody" in spec["paths"]["/v1/uploads"]["post"]
    assert (await client.get("/docs")).status_code == 200


def test_app_builds_nothing_at_import_or_creation(settings: Settings) -> None:
    app = create_app(settings)
    assert not hasattr(app.state, "blobstore")


def test_http_api_docs_list_every_error_code_with_its_status() -> None:
    from blobstore.api.errors import STATUS_BY_CODE
    from blobstore.errors import all_codes

    docs = (Path(__file__).resolve().parents[2] / "docs" / "http-api.md").read_text()
    for code in all_codes():
        assert f"| `{code}` | {STATUS_BY_CODE[code]} |" in docs, code

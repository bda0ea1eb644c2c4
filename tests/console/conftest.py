"""The console in-process: an app over a real service (memory storage, SQLite), tenants with their own tokens,
and a browser-like client per tenant that logs in through the console's form and keeps its cookie."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest
from fastapi import FastAPI

from blobstore.api import create_app
from blobstore.config import Settings
from blobstore.models import Scope
from blobstore.service import ArtifactService
from tests.security import conftest as security
from tests.security.conftest import READ_WRITE, Tenant, issue

BASE = "http://127.0.0.1:8420"
CSRF = re.compile(r'<meta name="csrf-token" content="([0-9a-f]*)">')


# The security suite's settings (a token issued beside the running app is seen at once) and service.
settings = security.settings
service = security.service


@pytest.fixture
async def app(settings: Settings, service: ArtifactService) -> AsyncIterator[FastAPI]:
    built = create_app(settings, service=service)
    async with built.router.lifespan_context(built):
        yield built


def client_for(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE)


@pytest.fixture
async def tenant_a(service: ArtifactService) -> Tenant:
    return await issue(service, "alpha", READ_WRITE | {Scope.ADMIN})


@pytest.fixture
async def tenant_b(service: ArtifactService) -> Tenant:
    return await issue(service, "beta")


Login = Callable[[Tenant], contextlib.AbstractAsyncContextManager[httpx.AsyncClient]]


@pytest.fixture
def login(app: FastAPI) -> Login:
    @contextlib.asynccontextmanager
    async def logged_in(tenant: Tenant) -> AsyncIterator[httpx.AsyncClient]:
        async with client_for(app) as browser:
            answer = await browser.post("/console/login", data={"token": tenant.token})
            assert answer.status_code == 303, answer.text
            yield browser

    return logged_in


async def csrf_of(browser: httpx.AsyncClient, path: str = "/console/artifacts") -> str:
    page = await browser.get(path)
    assert page.status_code == 200, page.text
    found = CSRF.search(page.text)
    assert found is not None
    assert found.group(1)
    return found.group(1)


Store = Callable[..., Awaitable[str]]


@pytest.fixture
def store(app: FastAPI) -> Store:
    """Store bytes through the API as ``tenant``; returns the artifact id."""

    async def upload(tenant: Tenant, data: bytes, name: str, **params: str) -> str:
        async with client_for(app) as api:
            answer = await api.post(
                "/v1/artifacts", params={"name": name, **params}, content=data, headers=tenant.headers
            )
        assert answer.status_code == 201, answer.text
        artifact_id: str = answer.json()["id"]
        return artifact_id

    return upload

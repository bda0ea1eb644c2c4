"""A token-protected app in-process: tenants A and B with their own tokens, HTTP and MCP-over-HTTP clients."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import httpx2
import pytest
from fastapi import FastAPI
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from blobstore.api import create_app
from blobstore.auth import create_token
from blobstore.config import Settings
from blobstore.models import Scope
from blobstore.runtime import open_service
from blobstore.service import ArtifactService
from mcp_resources.transports.http import McpHttpExtension
from tests.fixtures.settings import make_settings
from tests.security import leaks

BASE = "http://127.0.0.1"
READ_WRITE = frozenset({Scope.READ, Scope.WRITE})


@dataclass(frozen=True)
class Tenant:
    namespace: str
    token: str
    token_id: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def payload(label: str, size: int = 3000) -> bytes:
    """Recognisable random content, registered so the log check can look for it."""
    data = f"{label}-{os.urandom(8).hex()}:".encode() + os.urandom(size)
    leaks.register_payload(data)
    return data


async def issue(service: ArtifactService, namespace: str, scopes: frozenset[Scope] = READ_WRITE) -> Tenant:
    issued = await create_token(service.repo, namespace=namespace, scopes=scopes)
    leaks.register_secret(issued.token)
    return Tenant(namespace, issued.token, issued.record.id)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    # A token issued beside the running app is seen by its next request.
    return make_settings(tmp_path, auth_cache_seconds=0)


@pytest.fixture
async def service(settings: Settings) -> AsyncIterator[ArtifactService]:
    async with open_service(settings, server=False) as opened:
        yield opened


@contextlib.asynccontextmanager
async def running(app: FastAPI) -> AsyncIterator[FastAPI]:
    """The app's lifespan entered and left in one task of its own: the MCP session manager's task group must
    exit in the task that entered it, and fixture setup and teardown may run in different tasks."""
    started, stop = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        async with app.router.lifespan_context(app):
            started.set()
            await stop.wait()

    task = asyncio.create_task(hold())
    waiter = asyncio.create_task(started.wait())
    await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        waiter.cancel()
        task.result()
    try:
        yield app
    finally:
        stop.set()
        await task


@pytest.fixture
async def app(settings: Settings, service: ArtifactService) -> AsyncIterator[FastAPI]:
    built = create_app(settings, service=service, extensions=[McpHttpExtension(settings)])
    async with running(built):
        yield built


@pytest.fixture
async def http(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as client:
        yield client


@pytest.fixture
async def tenant_a(service: ArtifactService) -> Tenant:
    return await issue(service, "tenant-a")


@pytest.fixture
async def tenant_b(service: ArtifactService) -> Tenant:
    return await issue(service, "tenant-b")


McpConnect = Callable[[Tenant], contextlib.AbstractAsyncContextManager[Client]]


@pytest.fixture
def mcp_as(app: FastAPI) -> McpConnect:
    """An official-SDK MCP client over streamable HTTP (in-process) with a tenant's bearer token."""

    @contextlib.asynccontextmanager
    async def connect(tenant: Tenant) -> AsyncIterator[Client]:
        transport = httpx2.ASGITransport(app=app)
        async with (
            httpx2.AsyncClient(transport=transport, base_url=BASE, headers=tenant.headers) as raw,
            Client(streamable_http_client(f"{BASE}/mcp", http_client=raw)) as client,
        ):
            yield client

    return connect

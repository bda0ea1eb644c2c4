"""Fixtures for the MCP edge: a populated data directory, a real HTTP server over it, and MCP clients on every
transport (in memory in both protocol eras, streamable HTTP in both eras, and stdio)."""

from __future__ import annotations

import contextlib
import random
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
import sqlalchemy as sa
from mcp import Client, StdioServerParameters

from blobstore.config import Settings
from blobstore.ids import new_artifact_id
from blobstore.metadata.tables import artifacts
from blobstore.models import Artifact, Caller, NewArtifact
from blobstore.runtime import open_service
from blobstore.service import ArtifactService
from mcp_resources.transports.server import create_server, fixed_caller
from tests.fixtures.peers import peer_missing
from tests.fixtures.server import BLOBSTORE, serving

NAMESPACE = "default"
CALLER = Caller(namespace=NAMESPACE)
BULK = 2_500
BIG_SIZE = 20 * 1024 * 1024
TRANSPORTS = ["memory", "memory-legacy", "http", "http-legacy", "stdio"]
INSPECTOR_DIR = Path(__file__).resolve().parent / "inspector"
INSPECTOR_PACKAGE = INSPECTOR_DIR / "node_modules" / "@modelcontextprotocol" / "inspector"
NPX_PREFIX = "npx @modelcontextprotocol/inspector"


@pytest.fixture(scope="session")
def inspector() -> Path:
    """The MCP Inspector 0.15.0 of ``tests/mcp/inspector`` (installed by ``.ci/run``; here when missing)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        peer_missing("node and npm are needed for the MCP Inspector")
    if not INSPECTOR_PACKAGE.is_dir():
        subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"], cwd=INSPECTOR_DIR, check=True, capture_output=True
        )
    return INSPECTOR_DIR / "node_modules" / ".bin" / "mcp-inspector"


async def chunks(data: bytes, size: int = 1 << 20) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]
    if not data:
        yield b""


async def put(
    service: ArtifactService, data: bytes, name: str, mime_type: str | None = None, caller: Caller = CALLER
) -> Artifact:
    return await service.create_artifact(caller, chunks(data), name=name, mime_type=mime_type)


@dataclass
class Dataset:
    settings: Settings
    bulk_ids: list[str]
    big: Artifact
    big_bytes: bytes
    text: Artifact
    text_body: str
    medium: Artifact
    empty: Artifact
    foreign: Artifact
    expired_id: str


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[ArtifactService]:
    """A store of its own for one test, in memory."""
    async with open_service(Settings(data_dir=tmp_path, storage_url="memory://")) as svc:
        yield svc


async def _populate(settings: Settings) -> Dataset:
    async with open_service(settings) as service:
        # The bulk listing set shares one blob and goes straight to the repository: 2,500 rows, one file.
        seed = await put(service, b"bulk item\n", "bulk-seed.txt", "text/plain")
        # One multi-row insert (one transaction, one fsync) through the repository's engine and tables.
        now = service.clock()
        rows = [
            {
                "id": new_artifact_id(),
                "namespace": NAMESPACE,
                "name": f"bulk-{i:04d}.txt",
                "mime_type": "text/plain",
                "size": seed.size,
                "sha256": seed.sha256,
                "blob_id": seed.blob_id,
                "created_at": now + timedelta(microseconds=i),
                "expires_at": now + timedelta(days=1),
                "pinned": False,
                "user_metadata": {},
                "media": {},
            }
            for i in range(1, BULK)
        ]
        async with service.repo.engine.begin() as conn:
            await conn.execute(sa.insert(artifacts), rows)
        bulk_ids = [seed.id] + [str(row["id"]) for row in rows]
        big_bytes = random.Random(20).randbytes(BIG_SIZE)
        big = await put(service, big_bytes, "big.bin", "application/octet-stream")
        text_body = "Grüße, artifact store!\n" * 40
        text = await put(service, text_body.encode(), "notes.txt", "text/plain")
        medium = await put(
            service, random.Random(1).randbytes(600 * 1024), "medium.bin", "application/octet-stream"
        )
        empty = await put(service, b"", "empty.bin", "application/octet-stream")
        foreign = await put(
            service, b"not yours", "foreign.txt", "text/plain", caller=Caller(namespace="other")
        )
        expired = NewArtifact(
            id=new_artifact_id(),
            namespace=NAMESPACE,
            name="expired.txt",
            mime_type="text/plain",
            created_at=service.clock() - timedelta(hours=2),
            expires_at=service.clock() - timedelta(hours=1),
            pinned=False,
            metadata={},
            media={},
        )
        record = await service.repo.get_blob(seed.blob_id)
        assert record is not None
        expired_id = (await service.repo.commit_artifact(blob=record.info, artifact=expired)).artifact.id
    return Dataset(settings, bulk_ids, big, big_bytes, text, text_body, medium, empty, foreign, expired_id)


@pytest.fixture(scope="session")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    settings = Settings(data_dir=tmp_path_factory.mktemp("mcp-data"))
    return anyio.run(_populate, settings)


@pytest.fixture(scope="session")
def http_base(dataset: Dataset, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The real composition root (``blobstore serve``) under uvicorn in a subprocess, over the dataset."""
    root = tmp_path_factory.mktemp("mcp-http")
    with serving(root, "--server", "uvicorn", data_dir=dataset.settings.data_dir) as server:
        yield server.url


@contextlib.asynccontextmanager
async def connect(
    transport: str, dataset: Dataset, request: pytest.FixtureRequest, **options: Any
) -> AsyncIterator[Client]:
    """An official-SDK client to the store over ``transport``."""
    if transport.startswith("memory"):
        async with open_service(dataset.settings) as service:
            server = create_server(service, caller_for=fixed_caller(CALLER))
            mode = "legacy" if transport.endswith("legacy") else "auto"
            async with Client(server, mode=mode, **options) as client:
                yield client
    elif transport.startswith("http"):
        base = request.getfixturevalue("http_base")
        # The client as it ships: default settings (its 1 MiB cap on one server-sent event included).
        mode = "legacy" if transport.endswith("legacy") else "auto"
        async with Client(f"{base}/mcp", mode=mode, **options) as client:
            yield client
    elif transport == "stdio":
        params = StdioServerParameters(
            command=BLOBSTORE,
            args=["mcp", "--data-dir", str(dataset.settings.data_dir), "--namespace", NAMESPACE],
        )
        async with Client(params, **options) as client:
            yield client
    else:
        raise AssertionError(transport)


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)

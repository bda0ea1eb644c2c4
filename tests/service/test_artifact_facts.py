"""What content reads remember of the artifacts they looked up (``blobstore.artifact_facts``): a remembered
artifact answers for at most ``BLOBSTORE_FACTS_CACHE_SECONDS``; this process's own changes are seen at once,
another replica's within that bound, and nothing remembered ever answers for another namespace or turns a
live artifact into a 404."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from blobstore.api import create_app
from blobstore.artifact_facts import ArtifactFacts
from blobstore.config import Settings
from blobstore.errors import NotFound
from blobstore.models import Artifact, BlobInfo, Caller
from blobstore.runtime import open_service
from blobstore.service import ArtifactService
from tests.fixtures.asgi import app_client
from tests.fixtures.streams import chunks_of

BOUND = 0.4  # facts_cache_seconds of the replicas below
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _artifact(namespace: str, artifact_id: str, *, expires_at: datetime | None = None) -> Artifact:
    return Artifact(
        id=artifact_id,
        namespace=namespace,
        name="a.bin",
        mime_type="application/octet-stream",
        size=3,
        sha256="0" * 64,
        blob_id=1,
        created_at=NOW,
        expires_at=expires_at,
        pinned=False,
    )


BLOB = BlobInfo(key="k", size=3, sha256="0" * 64, block_size=1024, block_xxh3=("0" * 16,))


class Ticks:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_an_entry_answers_until_its_age_reaches_the_bound() -> None:
    ticks = Ticks()
    facts = ArtifactFacts(1.0, monotonic=ticks)
    facts.put(_artifact("alpha", "a_1"), BLOB)
    assert facts.get("alpha", "a_1", NOW) == (_artifact("alpha", "a_1"), BLOB)
    ticks.now += 0.99
    assert facts.get("alpha", "a_1", NOW) is not None
    ticks.now += 0.01
    assert facts.get("alpha", "a_1", NOW) is None
    assert len(facts) == 0


def test_an_entry_never_answers_for_another_namespace() -> None:
    facts = ArtifactFacts(1.0, monotonic=Ticks())
    facts.put(_artifact("alpha", "a_1"), BLOB)
    assert facts.get("beta", "a_1", NOW) is None
    assert facts.get("alpha", "a_1", NOW) is not None


def test_an_entry_past_its_remembered_expiry_is_dropped_so_the_database_is_asked() -> None:
    facts = ArtifactFacts(60.0, monotonic=Ticks())
    facts.put(_artifact("alpha", "a_1", expires_at=NOW + timedelta(seconds=5)), BLOB)
    assert facts.get("alpha", "a_1", NOW + timedelta(seconds=4)) is not None
    assert facts.get("alpha", "a_1", NOW + timedelta(seconds=5)) is None
    assert len(facts) == 0


def test_the_entries_are_bounded_and_the_oldest_lookup_goes_first() -> None:
    facts = ArtifactFacts(60.0, max_entries=3, monotonic=Ticks())
    for number in range(5):
        facts.put(_artifact("alpha", f"a_{number}"), BLOB)
    assert len(facts) == 3
    kept = [facts.get("alpha", f"a_{n}", NOW) is not None for n in range(5)]
    assert kept == [False, False, True, True, True]


def test_a_bound_of_zero_remembers_nothing() -> None:
    facts = ArtifactFacts(0, monotonic=Ticks())
    facts.put(_artifact("alpha", "a_1"), BLOB)
    assert not facts.enabled
    assert len(facts) == 0


# -- two replicas over one database and one store --------------------------------------------------------

ALPHA = Caller(namespace="alpha", actor="tester")
BETA = Caller(namespace="beta", actor="other")


def _whole(artifact: Artifact) -> tuple[None, tuple[int, int]]:
    return None, (0, artifact.size)


@pytest.fixture(params=["local-sqlite", "s3-postgresql"])
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    """Settings two replicas share: the same metadata database and the same blob store."""
    values: dict[str, object] = {
        "data_dir": tmp_path / "data",
        "storage_url": (tmp_path / "blobs").as_uri(),
        "database_url": f"sqlite+aiosqlite:///{tmp_path / 'metadata.sqlite3'}",
        "facts_cache_seconds": BOUND,
        "storage_chunk_size": 64 * 1024,
    }
    if request.param == "s3-postgresql":
        values["database_url"] = request.getfixturevalue("pg_url")
        values["storage_url"] = request.getfixturevalue("s3_storage_url")
        values["s3_endpoint_url"] = request.getfixturevalue("s3_endpoint_url")
    return Settings(**values)  # type: ignore[arg-type]


@contextlib.asynccontextmanager
async def replicas(settings: Settings) -> AsyncIterator[tuple[ArtifactService, ArtifactService]]:
    async with (
        open_service(settings, migrate=True) as first,
        open_service(settings) as second,
    ):
        yield first, second


async def test_a_delete_on_one_replica_is_not_found_on_the_other_within_the_bound(shared: Settings) -> None:
    data = os.urandom(100_000)
    async with replicas(shared) as (reader, deleter):
        stored = await reader.create_artifact(ALPHA, chunks_of(data), name="d.bin")
        assert (await reader.read_range(ALPHA, stored.id, _whole)).data == data  # now remembered
        await deleter.delete_artifact(ALPHA, stored.id)
        await asyncio.sleep(BOUND)
        with pytest.raises(NotFound):
            await reader.read_range(ALPHA, stored.id, _whole)


async def test_a_replicas_own_delete_and_unpin_are_seen_at_once(shared: Settings) -> None:
    async with replicas(shared) as (service, _):
        stored = await service.create_artifact(ALPHA, chunks_of(b"soon gone"), name="g.bin")
        await service.read_range(ALPHA, stored.id, _whole)
        await service.delete_artifact(ALPHA, stored.id)
        with pytest.raises(NotFound):
            await service.read_range(ALPHA, stored.id, _whole)

        kept = await service.create_artifact(ALPHA, chunks_of(b"pinned"), name="p.bin", ttl_seconds=60)
        await service.update_artifact(ALPHA, kept.id, pinned=True)
        await service.read_range(ALPHA, kept.id, _whole)
        await service.update_artifact(ALPHA, kept.id, pinned=False, ttl_seconds=60)
        remembered = service.facts.get("alpha", kept.id, service.clock())
        assert remembered is None  # forgotten by the change, so the next read asks the database


async def test_an_expiry_moved_later_elsewhere_is_never_answered_as_a_404(shared: Settings) -> None:
    async with replicas(shared) as (reader, writer):
        stored = await reader.create_artifact(ALPHA, chunks_of(b"extended"), name="e.bin", ttl_seconds=60)
        await reader.read_range(ALPHA, stored.id, _whole)  # remembered with an expiry a minute away
        await writer.update_artifact(ALPHA, stored.id, ttl_seconds=3600)
        later = datetime.now(UTC) + timedelta(seconds=120)
        reader.clock.source = lambda: later
        found = await reader.read_range(ALPHA, stored.id, _whole)
        assert found.data == b"extended"
        assert found.artifact.expires_at is not None
        assert found.artifact.expires_at > later


async def test_a_remembered_artifact_never_answers_another_namespace(shared: Settings) -> None:
    async with replicas(shared) as (service, _):
        stored = await service.create_artifact(ALPHA, chunks_of(b"private"), name="p.bin")
        await service.read_range(ALPHA, stored.id, _whole)
        with pytest.raises(NotFound):
            await service.read_range(BETA, stored.id, _whole)


async def test_over_http_a_delete_on_one_replica_is_a_404_on_the_other_within_the_bound(
    shared: Settings,
) -> None:
    data = os.urandom(70_000)
    async with (
        replicas(shared) as (one, two),
        app_client(create_app(shared, service=one)) as first,
        app_client(create_app(shared, service=two)) as second,
    ):
        created = await first.post("/v1/artifacts", params={"name": "h.bin"}, content=data)
        url = f"/v1/artifacts/{created.json()['id']}/content"
        ranged = {"Range": "bytes=100-199"}
        assert (await first.get(url, headers=ranged)).content == data[100:200]
        assert (await second.get(url, headers=ranged)).content == data[100:200]
        assert (await second.delete(url.removesuffix("/content"))).status_code == 204
        assert (await second.get(url, headers=ranged)).status_code == 404  # its own delete: at once
        await asyncio.sleep(BOUND)
        gone = await first.get(url, headers=ranged)
        assert gone.status_code == 404
        assert gone.headers["content-type"] == "application/problem+json"


async def test_a_blob_gone_under_a_remembered_artifact_is_looked_up_again(tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path / "data", storage_url=(tmp_path / "blobs").as_uri(), facts_cache_seconds=60
    )
    async with replicas(settings) as (reader, deleter):
        stored = await reader.create_artifact(ALPHA, chunks_of(b"x" * 5000), name="b.bin")
        await reader.read_range(ALPHA, stored.id, _whole)
        await deleter.delete_artifact(ALPHA, stored.id)
        await deleter.blobs.delete(next(iter(_blob_keys(tmp_path / "blobs"))))
        with pytest.raises(NotFound):
            await reader.read_range(ALPHA, stored.id, _whole)
        assert reader.facts.get("alpha", stored.id, reader.clock()) is None


def _blob_keys(root: Path) -> list[str]:
    return [str(path.relative_to(root)) for path in root.rglob("*") if path.is_file()]

"""A short single-request upload of content a live blob holds already: hashed and checked, never written.

Local disk over a SQLite file, where the service asks the store's live blobs on the worker thread that hashed
the body. The bytes are not written, fsynced, linked or unlinked; the commit deduplicates onto the live blob,
and when that blob was collected between the look-up and the commit, the bytes are kept after all.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from blobstore.config import Settings
from blobstore.errors import DigestMismatch, SizeMismatch
from blobstore.media import PROBE_BYTES
from blobstore.models import Caller
from blobstore.runtime import open_service
from blobstore.service import ArtifactService
from blobstore.storage.local import LocalBlobStore
from tests.fixtures.streams import chunks_of, read_back


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[ArtifactService]:
    settings = Settings(data_dir=tmp_path / "data")
    async with open_service(settings, migrate=True) as svc:
        assert isinstance(svc.blobs, LocalBlobStore)
        yield svc


@pytest.fixture
def caller() -> Caller:
    return Caller(namespace="alpha", actor="tester")


@pytest.fixture
def publishes(service: ArtifactService, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The digest of every generation the local store fsyncs and links."""
    published: list[str] = []
    original = LocalBlobStore._publish_blob

    def recording(store: LocalBlobStore, temp: object, sha256: str) -> str:
        published.append(sha256)
        return original(store, temp, sha256)  # type: ignore[arg-type]

    monkeypatch.setattr(LocalBlobStore, "_publish_blob", recording)
    return published


def files_under(root: Path) -> list[Path]:
    return sorted(path for path in root.rglob("*") if path.is_file())


async def test_a_known_short_body_is_not_written_again(
    service: ArtifactService, caller: Caller, publishes: list[str]
) -> None:
    data = os.urandom(1024)
    first = await service.create_artifact(caller, chunks_of(data), name="first")
    blobs_root = service.settings.data_dir / "blobs"
    before = files_under(blobs_root)

    second = await service.create_artifact(caller, chunks_of(data), name="second")

    assert publishes == [hashlib.sha256(data).hexdigest()]
    assert files_under(blobs_root) == before
    assert second.blob_id == first.blob_id
    assert await read_back(service, caller, second.id) == data


async def test_the_claims_of_a_known_body_are_still_checked(
    service: ArtifactService, caller: Caller, publishes: list[str]
) -> None:
    data = os.urandom(1024)
    await service.create_artifact(caller, chunks_of(data), name="first")

    with pytest.raises(DigestMismatch):
        await service.create_artifact(
            caller, chunks_of(data), name="claimed", expected_sha256=hashlib.sha256(b"other").hexdigest()
        )
    with pytest.raises(SizeMismatch):
        await service.create_artifact(caller, chunks_of(data), name="sized", expected_size=len(data) + 1)
    assert len(publishes) == 1
    page = await service.list_artifacts(caller, limit=10)
    assert [artifact.name for artifact in page.items] == ["first"]


async def test_a_body_longer_than_the_kept_head_is_written_as_before(
    service: ArtifactService, caller: Caller, publishes: list[str]
) -> None:
    data = os.urandom(PROBE_BYTES + 1)
    first = await service.create_artifact(caller, chunks_of(data, len(data)), name="first")
    second = await service.create_artifact(caller, chunks_of(data, len(data)), name="second")

    assert len(publishes) == 2
    assert second.blob_id == first.blob_id
    assert len([obj async for obj in service.blobs.iter_objects()]) == 1


async def test_a_live_blob_collected_before_the_commit_gets_the_bytes_kept_after_all(
    service: ArtifactService, caller: Caller, publishes: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = os.urandom(1024)
    first = await service.create_artifact(caller, chunks_of(data), name="first")
    database = service.settings.data_dir / "metadata.sqlite3"
    repo = service.repo
    looked_up = repo.live_content_blocking

    def then_collected(sha256: str, size: int) -> bool:
        live = looked_up(sha256, size)
        # What a cleanup's claim commits between the upload's look-up and its commit.
        with sqlite3.connect(database) as conn:
            conn.execute("UPDATE blobs SET state = 'tombstoned' WHERE sha256 = ?", (sha256,))
        return live

    monkeypatch.setattr(repo, "live_content_blocking", then_collected)
    second = await service.create_artifact(caller, chunks_of(data), name="second")

    assert second.blob_id != first.blob_id
    assert len(publishes) == 2
    assert await read_back(service, caller, second.id) == data
    keys = {obj.key async for obj in service.blobs.iter_objects()}
    assert len(keys) == 2

"""Random interleavings of upload, dedup upload, read, expiry, delete and cleanup, checked against a model."""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import tempfile
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, invariant, rule

from blobstore.cleanup import run_cleanup
from blobstore.cleanup_report import STEPS
from blobstore.config import Settings
from blobstore.errors import NotFound
from blobstore.metadata.migrate import upgrade
from blobstore.metadata.repository import MetadataRepository
from blobstore.models import Caller
from blobstore.runtime import build_service, cleanup_parts
from blobstore.storage.memory import MemoryBlobStore
from blobstore.store_clock import StoreClock
from tests.cleanup.helpers import FakeClock, artifact_rows, blob_rows, read_back, storage_keys, upload

T = TypeVar("T")
GRACE = 100
CONTENTS = [b"", b"a", b"alpha" * 300, b"beta" * 2000, bytes(range(256)) * 40]
CALLER = Caller(namespace="ns")

_template: list[Path] = []
# A RAM-backed directory when there is one: SQLite syncs every commit and the examples commit a lot.
_SCRATCH = "/dev/shm" if Path("/dev/shm").is_dir() else None


def migrated_template() -> Path:
    """One migrated SQLite file, copied for every example (migrating each time would dominate the run)."""
    if not _template:
        directory = Path(tempfile.mkdtemp(prefix="blobstore-stateful-", dir=_SCRATCH))
        path = directory / "template.db"
        upgrade(f"sqlite+aiosqlite:///{path}")
        _template.append(path)
    return _template[0]


@dataclass
class ModelArtifact:
    data: bytes
    expires_at: datetime | None


async def _nothing() -> AsyncIterator[bytes]:
    return
    yield b""


class CleanupMachine(RuleBasedStateMachine):
    artifacts = Bundle("artifacts")

    def __init__(self) -> None:
        super().__init__()
        self.runner = asyncio.Runner()
        self.directory = Path(tempfile.mkdtemp(prefix="blobstore-example-", dir=_SCRATCH))
        database = self.directory / "metadata.db"
        shutil.copyfile(migrated_template(), database)
        self.clock = FakeClock()
        config = Settings(
            data_dir=self.directory,
            storage_chunk_size=1024,
            gc_grace_seconds=GRACE,
            default_ttl_seconds=1000,
        )
        repo = self.run(MetadataRepository.open(f"sqlite+aiosqlite:///{database}"))
        blobs = MemoryBlobStore(block_size=1024)
        self.service = build_service(settings=config, blobs=blobs, repo=repo, clock=StoreClock(self.clock))
        self.model: dict[str, ModelArtifact] = {}

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.runner.run(coroutine)

    def teardown(self) -> None:
        try:
            self.run(self.service.repo.close())
        finally:
            self.runner.close()
            shutil.rmtree(self.directory, ignore_errors=True)

    def visible(self, item: ModelArtifact) -> bool:
        return item.expires_at is None or item.expires_at > self.clock()

    # -- rules ---------------------------------------------------------------------------------------------

    @rule(target=artifacts, content=st.sampled_from(CONTENTS), ttl=st.sampled_from([None, 30, 150, 600]))
    def upload(self, content: bytes, ttl: int | None) -> str:
        pinned = ttl is None
        artifact = self.run(upload(self.service, CALLER, content, ttl_seconds=ttl, pinned=pinned))
        expires = None if pinned else self.clock() + timedelta(seconds=ttl or 0)
        self.model[artifact.id] = ModelArtifact(content, expires)
        return artifact.id

    @rule(target=artifacts, source=artifacts)
    def dedup_upload(self, source: str) -> str:
        known = self.model.get(source)
        content = known.data if known is not None else CONTENTS[2]
        artifact = self.run(upload(self.service, CALLER, content, ttl_seconds=300))
        self.model[artifact.id] = ModelArtifact(content, self.clock() + timedelta(seconds=300))
        return artifact.id

    @rule(artifact_id=artifacts)
    def read(self, artifact_id: str) -> None:
        item = self.model.get(artifact_id)
        if item is not None and self.visible(item):
            assert self.run(read_back(self.service, CALLER, artifact_id)) == item.data
        else:
            with pytest.raises(NotFound):
                self.run(read_back(self.service, CALLER, artifact_id))

    @rule(seconds=st.sampled_from([1, 29, GRACE // 2, GRACE + 1, 400]))
    def time_passes(self, seconds: int) -> None:
        self.clock.advance(seconds)

    @rule(artifact_id=consumes(artifacts))
    def delete(self, artifact_id: str) -> None:
        # A row is deletable until cleanup removed it, even when it has already expired.
        if artifact_id in self.model:
            self.run(self.service.delete_artifact(CALLER, artifact_id))
            del self.model[artifact_id]
        else:
            with pytest.raises(NotFound):
                self.run(self.service.delete_artifact(CALLER, artifact_id))

    @rule(steps=st.lists(st.sampled_from(STEPS), unique=True, min_size=1))
    def cleanup(self, steps: list[str]) -> None:
        self.run(run_cleanup(cleanup_parts(self.service), steps=steps))  # type: ignore[arg-type]
        if "expire" in steps:
            self.model = {key: item for key, item in self.model.items() if self.visible(item)}

    @rule()
    def settle(self) -> None:
        """Full cleanup, a grace period, full cleanup again: every blob unreferenced at the first run is gone.

        Artifacts expiring during the grace period only lose their blobs one grace period later, so storage
        must hold exactly the contents referenced right after the first run.
        """
        self.run(run_cleanup(cleanup_parts(self.service)))
        self.model = {key: item for key, item in self.model.items() if self.visible(item)}
        expected = sorted({hashlib.sha256(item.data).hexdigest() for item in self.model.values()})
        self.clock.advance(GRACE + 1)
        self.run(run_cleanup(cleanup_parts(self.service)))
        self.model = {key: item for key, item in self.model.items() if self.visible(item)}
        blobs = self.run(blob_rows(self.service))
        assert sorted(str(row["sha256"]) for row in blobs) == expected
        assert self.run(storage_keys(self.service)) == {row["storage_key"] for row in blobs}

    # -- invariants ----------------------------------------------------------------------------------------

    @invariant()
    def every_visible_artifact_reads_back_and_nothing_else_is_listed(self) -> None:
        listed = self.run(self.service.list_artifacts(CALLER, limit=1000))
        visible = {key for key, item in self.model.items() if self.visible(item)}
        assert {artifact.id for artifact in listed.items} == visible
        for artifact_id in visible:
            assert self.run(read_back(self.service, CALLER, artifact_id)) == self.model[artifact_id].data

    @invariant()
    def rows_match_the_model_and_point_at_live_stored_blobs(self) -> None:
        rows = self.run(artifact_rows(self.service))
        assert {row["id"] for row in rows} == set(self.model)
        blobs = {row["id"]: row for row in self.run(blob_rows(self.service))}
        keys = self.run(storage_keys(self.service))
        for row in rows:
            blob = blobs[row["blob_id"]]
            assert blob["state"] == "live"
            assert blob["storage_key"] in keys


CleanupMachine.TestCase.settings = settings(
    max_examples=20,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestCleanupModel = CleanupMachine.TestCase

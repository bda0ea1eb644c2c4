"""Cleanup killed with SIGKILL at random points and run again leaves a consistent store."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from blobstore.config import Settings
from blobstore.models import Caller
from blobstore.service import ArtifactService
from tests.cleanup.helpers import GRACE, UPLOAD_TTL, FakeClock, assert_consistent, read_back, upload

ROOT = Path(__file__).resolve().parents[2]
MONTH = 30 * 24 * 3600


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data


def _env(settings: Settings) -> dict[str, str]:
    env = dict(os.environ)
    env["BLOBSTORE_DATA_DIR"] = str(settings.data_dir)
    env["BLOBSTORE_DATABASE_URL"] = settings.resolved_database_url
    env["BLOBSTORE_STORAGE_URL"] = settings.resolved_storage_url
    env["BLOBSTORE_GC_GRACE_SECONDS"] = str(settings.gc_grace_seconds)
    env["BLOBSTORE_UPLOAD_TTL_SECONDS"] = str(settings.upload_ttl_seconds)
    env["BLOBSTORE_STORAGE_CHUNK_SIZE"] = str(settings.storage_chunk_size)
    if settings.s3_endpoint_url:
        env["BLOBSTORE_S3_ENDPOINT_URL"] = settings.s3_endpoint_url
    return env


def _run_child(env: dict[str, str], offset: float, crash_at: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tests.cleanup.crash_child"],
        cwd=ROOT,
        env={**env, "CRASH_CLOCK_OFFSET": str(offset), "CRASH_AT": str(crash_at)},
        capture_output=True,
        text=True,
        timeout=120,
    )


async def _populate(service: ArtifactService, caller: Caller, rng: random.Random) -> dict[str, bytes]:
    """Live, expiring, deleted and deduplicated artifacts, orphans, stale and open uploads."""
    live: dict[str, bytes] = {}
    pool = [rng.randbytes(rng.randrange(100, 9000)) for _ in range(6)]
    for index in range(24):
        data = pool[index % len(pool)] if index % 3 else rng.randbytes(rng.randrange(50, 6000))
        roll = index % 4
        if roll == 0:
            await upload(service, caller, data, ttl_seconds=60)
        elif roll == 1:
            doomed = await upload(service, caller, data, ttl_seconds=MONTH)
            await service.delete_artifact(caller, doomed.id)
        else:
            kept = await upload(service, caller, data, ttl_seconds=MONTH)
            live[kept.id] = data
    for _ in range(3):
        await service.blobs.put(_once(rng.randbytes(500)))
    for index in range(3):
        session = await service.uploads.begin(caller, name=f"stale{index}", size=2048, chunk_size=1024)
        await service.uploads.put_chunk(caller, session.id, 0, _once(rng.randbytes(1024)))
    return live


async def test_cleanup_killed_at_random_points_then_rerun_leaves_a_consistent_store(
    service: ArtifactService, settings: Settings, caller: Caller, clock: FakeClock
) -> None:
    rng = random.Random(20260728)
    live = await _populate(service, caller, rng)
    env = _env(settings)
    offset = UPLOAD_TTL + 10.0
    crashes = 0
    for _ in range(5):
        result = _run_child(env, offset, crash_at=rng.randrange(1, 40))
        assert result.returncode in (0, -signal.SIGKILL), result.stderr[-2000:]
        crashes += result.returncode == -signal.SIGKILL
        for artifact_id, data in live.items():
            assert await read_back(service, caller, artifact_id) == data
        offset += rng.choice([0, GRACE / 2, GRACE + 1])
    assert crashes >= 2, "the crash points should mostly fall inside a run"
    for _ in range(2):
        offset += GRACE + 1
        final = _run_child(env, offset, crash_at=0)
        assert final.returncode == 0, final.stderr[-2000:]
    clock.advance(offset)
    counts = await assert_consistent(service, swept=True)
    assert counts["artifacts"] == len(live)

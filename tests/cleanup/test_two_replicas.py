"""Two server processes on PostgreSQL + S3, each running periodic cleanup, under 200 overlapping uploads."""

from __future__ import annotations

import hashlib
import os
import random
import signal
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import BinaryIO

import anyio
import httpx
import pytest
import sqlalchemy as sa

from blobstore.cleanup import run_cleanup
from blobstore.config import Settings
from blobstore.metadata.migrate import upgrade
from blobstore.runtime import cleanup_parts, open_service
from tests.cleanup.helpers import assert_consistent, blob_rows
from tests.fixtures.ports import free_port
from tests.fixtures.server import wait_ready

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.s3]

ROOT = Path(__file__).resolve().parents[2]
GRACE = 3
UPLOADS = 200
WORKERS = 8


@dataclass
class Replicas:
    bases: list[str]
    env: dict[str, str]
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[BinaryIO] = field(default_factory=list)


@pytest.fixture
def replicas(pg_url: str, s3_storage_url: str, s3_endpoint_url: str, tmp_path: Path) -> Iterator[Replicas]:
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(upgrade, pg_url).result()
    env = {
        **os.environ,
        "BLOBSTORE_DATABASE_URL": pg_url,
        "BLOBSTORE_STORAGE_URL": s3_storage_url,
        "BLOBSTORE_S3_ENDPOINT_URL": s3_endpoint_url,
        "BLOBSTORE_GC_GRACE_SECONDS": str(GRACE),
        "BLOBSTORE_CLEANUP_INTERVAL_SECONDS": "1",
        "BLOBSTORE_STORAGE_CHUNK_SIZE": "65536",
        "BLOBSTORE_LOG_LEVEL": "warning",
    }
    setup = Replicas(bases=[], env=env)
    try:
        for index in range(2):
            port = free_port()
            log = (tmp_path / f"replica{index}.log").open("wb")
            setup.logs.append(log)
            process = subprocess.Popen(
                [sys.executable, "-m", "tests.cleanup.replica"],
                cwd=ROOT,
                env={**env, "BLOBSTORE_PORT": str(port), "BLOBSTORE_DATA_DIR": str(tmp_path / f"r{index}")},
                stdout=subprocess.DEVNULL,
                # A file, not a pipe: nobody drains a pipe during the test, and a full one blocks the server.
                stderr=log,
            )
            setup.processes.append(process)
            setup.bases.append(f"http://127.0.0.1:{port}")
        for process, base, log_file in zip(setup.processes, setup.bases, setup.logs, strict=True):
            wait_ready(process, base, Path(log_file.name))
        yield setup
    finally:
        for process in setup.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in setup.processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for log_file in setup.logs:
            log_file.close()


def _log_tail(directory: Path, index: int, size: int | None = 4000) -> str:
    text = (directory / f"replica{index}.log").read_text(errors="replace")
    return text if size is None else text[-size:]


@dataclass
class Tally:
    uploaded: int = 0
    short_lived: int = 0
    deleted: int = 0
    reads: int = 0
    kept: dict[str, str] = field(default_factory=dict)


async def test_two_replicas_with_cleanup_running_in_both_lose_nothing(
    replicas: Replicas, pg_url: str, s3_storage_url: str, s3_endpoint_url: str, tmp_path: Path
) -> None:
    rng = random.Random(4242)
    pool = [rng.randbytes(rng.randrange(1, 80_000)) for _ in range(24)]
    tally = Tally()
    limiter = anyio.CapacityLimiter(WORKERS)

    async def one(index: int, http: httpx.AsyncClient) -> None:
        # Each wave draws from a window of the pool overlapping the previous one, so content that went
        # unreferenced (and is being swept) in one wave is uploaded again in the next.
        wave = index * 4 // UPLOADS
        data = pool[(wave * 5 + rng.randrange(10)) % len(pool)]
        here, there = replicas.bases[index % 2], replicas.bases[(index + 1) % 2]
        roll = rng.random()
        ttl = 1 if roll < 0.45 else 86_400
        async with limiter:
            response = await http.post(
                f"{here}/v1/artifacts",
                params={"name": f"item-{index}.bin", "ttl_seconds": ttl},
                content=data,
                headers={"content-type": "application/octet-stream"},
            )
            assert response.status_code == 201, response.text
            artifact_id = response.json()["id"]
            tally.uploaded += 1
            if ttl == 1:
                tally.short_lived += 1
                return
            if roll < 0.75:
                assert (await http.delete(f"{there}/v1/artifacts/{artifact_id}")).status_code == 204
                tally.deleted += 1
                return
            read = await http.get(f"{there}/v1/artifacts/{artifact_id}/content")
            assert read.status_code == 200
            assert hashlib.sha256(read.content).hexdigest() == hashlib.sha256(data).hexdigest()
            tally.reads += 1
            tally.kept[artifact_id] = hashlib.sha256(data).hexdigest()

    async def drive() -> int:
        lost = 0
        # Idle connections are dropped by the client well before uvicorn's 5 s keep-alive timeout: reusing one
        # that the server is closing at that moment (after the pause between waves) is a ReadError.
        limits = httpx.Limits(keepalive_expiry=1.0)
        async with httpx.AsyncClient(timeout=120, limits=limits) as http:
            for wave in range(4):
                async with anyio.create_task_group() as group:
                    for index in range(wave * UPLOADS // 4, (wave + 1) * UPLOADS // 4):
                        group.start_soon(one, index, http)
                if wave < 3:
                    # Let the replicas' cleanup expire and sweep part of this wave before the next reuses it.
                    # A pause, not a wait for a condition: the scenario is cleanup racing the next wave over
                    # whatever it has swept by then, not a sweep that is known to be finished.
                    await anyio.sleep(GRACE + 1.5)
            for artifact_id, sha in tally.kept.items():
                for base in replicas.bases:
                    read = await http.get(f"{base}/v1/artifacts/{artifact_id}/content")
                    if read.status_code != 200 or hashlib.sha256(read.content).hexdigest() != sha:
                        lost += 1
        return lost

    try:
        lost = await drive()
    except Exception as exc:
        logs = "\n".join(_log_tail(tmp_path, index) for index in range(2))
        raise AssertionError(f"{exc!r}; replica logs:\n{logs}") from exc

    settings = Settings(
        data_dir=tmp_path / "check",
        database_url=pg_url,
        storage_url=s3_storage_url,
        s3_endpoint_url=s3_endpoint_url,
        gc_grace_seconds=GRACE,
    )
    async with open_service(settings) as service:
        async with service.repo.engine.connect() as conn:
            generations = await conn.scalar(
                sa.text("SELECT last_value FROM pg_sequences WHERE sequencename = 'blobs_id_seq'")
            )
        during = await assert_consistent(service, swept=False)
        live_blobs = len(await blob_rows(service))
        later = service.clock() + timedelta(seconds=GRACE + 1)
        service.clock.source = lambda: later
        await run_cleanup(cleanup_parts(service))
        final_time = later + timedelta(seconds=GRACE + 1)
        service.clock.source = lambda: final_time
        await run_cleanup(cleanup_parts(service))
        after = await assert_consistent(service, swept=True)
    swept_during_run = int(generations or 0) - live_blobs
    failures = sum(_log_tail(tmp_path, index, None).count("periodic cleanup failed") for index in range(2))
    print(
        f"\ntwo replicas: uploads={tally.uploaded} short_lived={tally.short_lived} deleted={tally.deleted} "
        f"kept={len(tally.kept)} cross_replica_reads={tally.reads} lost={lost} cleanup_failures={failures} "
        f"blob_generations_created={generations} swept_by_replicas={swept_during_run} "
        f"rows_at_end={during['artifacts']} artifacts_after_final_sweep={after['artifacts']} "
        f"blobs_after_final_sweep={after['blobs']}"
    )
    assert tally.uploaded == UPLOADS
    assert lost == 0
    assert failures == 0
    assert after["artifacts"] == len(tally.kept)
    assert swept_during_run > 0, "cleanup in the replicas should have freed blobs while uploads went on"

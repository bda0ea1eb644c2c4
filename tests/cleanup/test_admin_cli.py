"""The admin commands run beside a live service: cleanup, verify, stats, migrate."""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest
import sqlalchemy as sa
from click.testing import CliRunner, Result

from blobstore.cleanup import periodic_cleanup
from blobstore.cli import main
from blobstore.config import Settings
from blobstore.events import ArtifactChange, ArtifactEvent
from blobstore.metadata.tables import artifacts
from blobstore.models import Caller
from blobstore.runtime import cleanup_parts, open_service
from blobstore.service import ArtifactService
from tests.cleanup.helpers import GRACE, blob_rows, storage_keys, upload


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data


@pytest.fixture
def local_settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", storage_chunk_size=4096, gc_grace_seconds=GRACE)


def invoke(settings: Settings, *args: str, env: dict[str, str] | None = None) -> Result:
    environment = {"BLOBSTORE_STORAGE_CHUNK_SIZE": str(settings.storage_chunk_size), **(env or {})}
    return CliRunner().invoke(main, [*args, "--data-dir", str(settings.data_dir)], env=environment)


async def ainvoke(settings: Settings, *args: str, env: dict[str, str] | None = None) -> Result:
    """The command from async tests: it runs its own event loop, so it gets a thread."""
    return await anyio.to_thread.run_sync(functools.partial(invoke, settings, *args, env=env))


async def test_cleanup_command_reports_per_step_and_honours_only_dry_run_and_grace(
    local_settings: Settings,
) -> None:
    caller = Caller(namespace="alpha")
    async with open_service(local_settings) as service:
        gone = await upload(service, caller, b"delete me" * 100)
        await service.delete_artifact(caller, gone.id)
        await service.blobs.put(_once(b"orphan"))

    marked = await ainvoke(local_settings, "cleanup", "--json", "--only", "blobs")
    assert marked.exit_code == 0, marked.output
    assert json.loads(marked.output)["steps"][0]["details"]["marked_unreferenced"] == 1

    dry = await ainvoke(local_settings, "cleanup", "--json", "--dry-run", "--grace", "0")
    assert dry.exit_code == 0, dry.output
    report = json.loads(dry.output)
    steps = {step["step"]: step for step in report["steps"]}
    assert list(steps) == ["expire", "uploads", "blobs", "orphans"]
    assert (steps["blobs"]["items"], steps["blobs"]["bytes"]) == (1, 900)
    assert (steps["orphans"]["items"], steps["orphans"]["bytes"]) == (1, 6)
    assert report["dry_run"] is True

    real = await ainvoke(local_settings, "cleanup", "--grace", "0")
    assert real.exit_code == 0, real.output
    assert "freed" in real.output
    assert "blobs    freed          1 items" in real.output
    async with open_service(local_settings) as service:
        assert await blob_rows(service) == []
        assert await storage_keys(service) == set()


async def test_cleanup_with_zero_grace_frees_in_one_run_and_reports_freed_apart_from_expired(
    local_settings: Settings,
) -> None:
    caller = Caller(namespace="alpha")
    async with open_service(local_settings) as service:
        expiring = await upload(service, caller, b"e" * 12_000, ttl_seconds=3600)
        deleted = await upload(service, caller, b"d" * 5_000)
        await upload(service, caller, b"k" * 700)  # stays
        await service.delete_artifact(caller, deleted.id)
        async with service.repo.engine.begin() as conn:
            await conn.execute(
                sa.update(artifacts)
                .where(artifacts.c.id == expiring.id)
                .values(expires_at=datetime.now(UTC) - timedelta(seconds=1))
            )
        assert len(await storage_keys(service)) == 3

    dry = json.loads((await ainvoke(local_settings, "cleanup", "--json", "--dry-run", "--grace", "0")).output)
    dry_steps = {step["step"]: step for step in dry["steps"]}
    first = await ainvoke(local_settings, "cleanup", "--json", "--grace", "0")
    assert first.exit_code == 0, first.output
    report = json.loads(first.output)
    steps = {step["step"]: step for step in report["steps"]}
    async with open_service(local_settings) as service:
        left = await storage_keys(service)
        rows = await blob_rows(service)
    second = json.loads((await ainvoke(local_settings, "cleanup", "--json", "--grace", "0")).output)
    text = await ainvoke(local_settings, "cleanup", "--grace", "0")

    # One run: the expired artifact's blob and the deleted artifact's blob are both gone from storage.
    assert len(left) == 1
    assert [row["size"] for row in rows] == [700]
    assert (steps["expire"]["items"], steps["expire"]["expired_bytes"], steps["expire"]["bytes"]) == (
        1,
        12_000,
        0,
    )
    assert (steps["blobs"]["items"], steps["blobs"]["bytes"]) == (2, 17_000)
    # ``bytes`` is what left storage in this run; the expired artifacts' size is its own figure.
    assert (report["bytes"], report["expired_bytes"]) == (17_000, 12_000)
    # A dry run with zero grace announces the blob the real run frees (it is unreferenced already).
    assert (dry_steps["blobs"]["items"], dry_steps["blobs"]["bytes"]) == (1, 5_000)
    assert dry_steps["expire"]["expired_bytes"] == 12_000
    assert dry["expired_bytes"] == 12_000
    assert (second["bytes"], second["expired_bytes"], second["items"]) == (0, 0, 0)
    assert text.exit_code == 0, text.output
    assert "  expire   expired        0 artifacts" in text.output
    assert "  total    freed 0 B on storage" in text.output


def test_cleanup_grace_comes_from_the_environment_too(local_settings: Settings) -> None:
    result = CliRunner().invoke(
        main,
        ["cleanup", "--json", "--dry-run", "--data-dir", str(local_settings.data_dir)],
        env={"BLOBSTORE_GC_GRACE_SECONDS": "42"},
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["grace_seconds"] == 42


def test_cleanup_rejects_an_unknown_step(local_settings: Settings) -> None:
    result = invoke(local_settings, "cleanup", "--only", "everything")
    assert result.exit_code == 2
    assert "everything" in result.output


async def test_verify_reports_missing_corrupt_and_orphaned_blobs(local_settings: Settings) -> None:
    caller = Caller(namespace="alpha")
    async with open_service(local_settings) as service:
        healthy = await upload(service, caller, b"healthy" * 1000)
        corrupt = await upload(service, caller, b"corrupt" * 1000)
        missing = await upload(service, caller, b"missing" * 1000)
        orphan = await service.blobs.put(_once(b"orphan"))
        paths = {
            a.blob_id: service.local_path((await service.open_artifact(caller, a.id))[1])
            for a in (corrupt, missing)
        }
    corrupt_path, missing_path = paths[corrupt.blob_id], paths[missing.blob_id]
    assert corrupt_path is not None
    assert missing_path is not None
    with corrupt_path.open("r+b") as handle:
        handle.seek(5000)
        handle.write(b"X")
    missing_path.unlink()

    result = await ainvoke(local_settings, "verify", "--json")
    assert result.exit_code == 1, result.output
    report = json.loads(result.output)
    assert (report["checked"], report["missing"], report["corrupt"]) == (
        3,
        [missing.blob_id],
        [corrupt.blob_id],
    )
    assert report["recent_unknown"] == 1
    assert report["orphaned"] == []
    aged = await ainvoke(local_settings, "verify", "--json", env={"BLOBSTORE_GC_GRACE_SECONDS": "0"})
    assert json.loads(aged.output)["orphaned"] == [orphan.key]
    assert healthy.blob_id not in report["missing"] + report["corrupt"]
    text = await ainvoke(local_settings, "verify", "--sample", "0.5")
    assert text.exit_code in (0, 1)
    assert "of 3 blobs" in text.output


async def test_verify_passes_on_a_healthy_store(local_settings: Settings) -> None:
    async with open_service(local_settings) as service:
        await upload(service, Caller(namespace="alpha"), b"fine" * 10)
    result = await ainvoke(local_settings, "verify")
    assert result.exit_code == 0, result.output
    assert "missing   0" in result.output


async def test_stats_shows_dedup_ratio_open_uploads_and_what_is_due(local_settings: Settings) -> None:
    caller = Caller(namespace="alpha")
    async with open_service(local_settings) as service:
        for _ in range(3):
            await upload(service, caller, b"same" * 250)
        gone = await upload(service, caller, b"other" * 200)
        await service.delete_artifact(caller, gone.id)
        await service.uploads.begin(caller, name="open.bin")
    result = await ainvoke(local_settings, "stats", "--json")
    assert result.exit_code == 0, result.output
    figures = json.loads(result.output)
    assert (figures["artifacts"], figures["blobs"], figures["open_uploads"]) == (3, 2, 1)
    assert (figures["bytes_logical"], figures["bytes_stored"]) == (3000, 2000)
    assert figures["dedup_ratio"] == 1.5
    assert figures["due"]["unreferenced_blobs"] == 1
    text = await ainvoke(local_settings, "stats")
    assert "dedup ratio" in text.output
    assert "1.50" in text.output


def test_migrate_creates_and_then_reports_the_current_revision(local_settings: Settings) -> None:
    first = invoke(local_settings, "migrate")
    assert first.exit_code == 0, first.output
    assert "migrated from empty" in first.output
    again = invoke(local_settings, "migrate")
    assert "already at revision" in again.output


async def test_periodic_cleanup_expires_artifacts_in_the_background(local_settings: Settings) -> None:
    caller = Caller(namespace="alpha")
    async with open_service(local_settings) as service:
        expired = anyio.Event()

        async def listen(event: ArtifactEvent) -> None:
            if event.change is ArtifactChange.EXPIRED:
                expired.set()

        service.events.subscribe(listen)
        artifact = await upload(service, caller, b"tick", ttl_seconds=1)
        service.clock.source = _shifted(service, 5)
        async with periodic_cleanup(cleanup_parts(service), 0.05):
            with anyio.fail_after(30):
                await expired.wait()
        assert await service.repo.get_artifact(caller.namespace, artifact.id, now=service.clock()) is None


async def test_leaving_periodic_cleanup_lets_its_run_finish_and_leaves_no_task_behind(
    local_settings: Settings,
) -> None:
    # A run cancelled inside a database call left SQLAlchemy's close of the invalidated connection pending
    # for good, and the event loop's shutdown then waited on it forever (a CI run hung here).
    before = asyncio.all_tasks()
    caller = Caller(namespace="alpha")
    async with open_service(local_settings) as service:
        for index in range(20):
            await upload(service, caller, f"item {index}".encode(), ttl_seconds=1)
        service.clock.source = _shifted(service, 5)
        for _ in range(5):
            async with periodic_cleanup(cleanup_parts(service), 0.001):
                await anyio.sleep(0.05)  # the runs follow each other: one is under way when the block ends
    await anyio.sleep(0.1)
    assert [task for task in asyncio.all_tasks() - before if task is not asyncio.current_task()] == []


def _shifted(service: ArtifactService, seconds: float) -> Callable[[], datetime]:
    original = service.clock.source
    return lambda: original() + timedelta(seconds=seconds)

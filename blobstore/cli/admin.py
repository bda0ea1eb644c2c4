"""Admin commands: ``cleanup``, ``verify``, ``stats``, ``migrate``.

They open storage and metadata without the server's data-directory lock, so they run beside a running server
(every step they take is safe against concurrent requests and against another cleanup).
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from blobstore.cleanup import run_cleanup
from blobstore.cleanup_report import STEPS, CleanupReport, Step, parse_steps
from blobstore.cli import main
from blobstore.cli.common import data_dir_option, describe_error, echo_json, fail, run_or_fail, settings_from
from blobstore.config import Settings
from blobstore.errors import BlobstoreError
from blobstore.metadata.migrate import current_revision, upgrade
from blobstore.runtime import cleanup_parts, open_service, prepare_data_dir
from blobstore.service import ArtifactService
from blobstore.units import human_bytes
from blobstore.verify import VerifyReport, verify_store

T = TypeVar("T")

LARGE_RUN = 1000
"""Items from which a step gets a progress bar (on a terminal)."""


def _with_service(settings: Settings, action: Callable[[ArtifactService], Awaitable[T]]) -> T:
    async def run() -> T:
        async with open_service(settings, server=False) as service:
            return await action(service)

    return run_or_fail(run)


class _TerminalProgress:
    """A progress bar on stderr for steps with many items; silent when stderr is not a terminal."""

    def __init__(self) -> None:
        self._progress = Progress(
            TextColumn("{task.description:<8}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        self._tasks: dict[Step, TaskID] = {}
        self._totals: dict[Step, int | None] = {}
        self._done: dict[Step, int] = {}

    def __enter__(self) -> _TerminalProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def step_started(self, step: Step, total: int | None) -> None:
        self._totals[step] = total
        self._done[step] = 0
        if total is not None and total >= LARGE_RUN:
            self._tasks[step] = self._progress.add_task(step, total=total)

    def advanced(self, step: Step, count: int) -> None:
        self._done[step] = self._done.get(step, 0) + count
        if step not in self._tasks and self._done[step] >= LARGE_RUN:
            self._tasks[step] = self._progress.add_task(step, total=self._totals.get(step))
            count = self._done[step]
        if step in self._tasks:
            self._progress.advance(self._tasks[step], count)

    def step_finished(self, step: Step) -> None:
        task = self._tasks.pop(step, None)
        if task is not None:
            self._progress.remove_task(task)


@main.command("cleanup")
@data_dir_option
@click.option("--dry-run", is_flag=True, help="Report what would be freed; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option(
    "--only",
    type=click.Choice(STEPS),
    multiple=True,
    help="Run only this step (repeatable); default: expire, uploads, blobs, orphans in that order.",
)
@click.option(
    "--grace",
    type=click.IntRange(min=0),
    default=None,
    help="Seconds an unreferenced blob or unknown object must age before it is deleted "
    "(env BLOBSTORE_GC_GRACE_SECONDS).",
)
def cleanup_command(
    data_dir: str | None, dry_run: bool, as_json: bool, only: tuple[str, ...], grace: int | None
) -> None:
    """Expire artifacts, purge stale uploads, sweep unreferenced blobs and orphaned objects."""
    settings = settings_from(data_dir=data_dir, gc_grace_seconds=grace)
    steps = parse_steps(only)
    show_bar = not as_json and sys.stderr.isatty()

    async def action(service: ArtifactService) -> CleanupReport:
        if not show_bar:
            return await run_cleanup(cleanup_parts(service), steps=steps, dry_run=dry_run)
        with _TerminalProgress() as progress:
            return await run_cleanup(cleanup_parts(service), steps=steps, dry_run=dry_run, progress=progress)

    report = _with_service(settings, action)
    if as_json:
        echo_json(report.to_dict())
        return
    verb = "would free" if dry_run else "freed"
    expired_verb = "would expire" if dry_run else "expired"
    click.echo(f"cleanup{' (dry run)' if dry_run else ''}, grace {report.grace_seconds}s")
    for step in report.steps:
        details = ", ".join(f"{name} {count}" for name, count in sorted(step.details.items()) if count)
        if step.step == "expire":
            # Expired artifacts free no storage themselves: their blobs are freed (and counted) by `blobs`.
            size = human_bytes(step.expired_bytes)
            line = f"  {step.step:<8} {expired_verb} {step.items:>8} artifacts {size:>12}"
        else:
            size = human_bytes(step.bytes)
            line = f"  {step.step:<8} {verb:<{len(expired_verb)}} {step.items:>8} items {size:>12}"
        if step.skipped:
            line += f"  (skipped: {step.skipped})"
        elif details:
            line += f"  ({details})"
        click.echo(line)
    click.echo(f"  {'total':<8} {verb} {human_bytes(report.bytes)} on storage")


@main.command("verify")
@data_dir_option
@click.option(
    "--sample",
    type=click.FloatRange(min=0, max=1, min_open=True),
    default=1.0,
    show_default=True,
    help="Fraction of blobs to re-hash.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def verify_command(data_dir: str | None, sample: float, as_json: bool) -> None:
    """Re-hash stored blobs; report missing, corrupt and orphaned ones (exit 1 if any is missing/corrupt)."""
    settings = settings_from(data_dir=data_dir)
    report: VerifyReport = _with_service(
        settings,
        lambda service: verify_store(
            service.repo,
            service.blobs,
            grace_seconds=settings.gc_grace_seconds,
            clock=service.clock,
            sample=sample,
        ),
    )
    if as_json:
        echo_json(report.to_dict())
    else:
        click.echo(
            f"checked {report.checked} of {report.blobs} blobs ({human_bytes(report.bytes_checked)}, "
            f"sample {report.sample:g})"
        )
        click.echo(f"  missing   {len(report.missing)}" + _ids(report.missing))
        click.echo(f"  corrupt   {len(report.corrupt)}" + _ids(report.corrupt))
        click.echo(
            f"  orphaned  {len(report.orphaned)} ({human_bytes(report.orphaned_bytes)}; "
            "freed by `blobstore cleanup --only orphans`)"
        )
        if report.recent_unknown:
            click.echo(
                f"  unknown objects younger than the grace period (writes in flight): {report.recent_unknown}"
            )
    if not report.ok:
        sys.exit(1)


def _ids(ids: list[int]) -> str:
    if not ids:
        return ""
    shown = ", ".join(str(blob_id) for blob_id in ids[:20])
    return f"  (blob ids {shown}{', …' if len(ids) > 20 else ''})"


@main.command("stats")
@data_dir_option
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def stats_command(data_dir: str | None, as_json: bool) -> None:
    """Artifacts, blobs, bytes, cached media views, dedup ratio, open uploads and what is due for cleanup."""
    settings = settings_from(data_dir=data_dir)

    async def action(service: ArtifactService) -> dict[str, Any]:
        now = service.clock()
        figures: dict[str, Any] = dict(await service.repo.stats(now=now))
        due = await service.repo.cleanup_due(
            now=now, older_than=now - timedelta(seconds=service.settings.gc_grace_seconds)
        )
        stored = figures["bytes_stored"]
        figures["dedup_ratio"] = round(figures["bytes_logical"] / stored, 3) if stored else None
        figures["due"] = due
        return figures

    figures = _with_service(settings, action)
    if as_json:
        echo_json(figures)
        return
    due = figures["due"]
    ratio = figures["dedup_ratio"]
    click.echo(f"artifacts      {figures['artifacts']:>10}  {human_bytes(figures['bytes_logical'])}")
    click.echo(f"blobs          {figures['blobs']:>10}  {human_bytes(figures['bytes_stored'])}")
    click.echo(f"views          {figures['renditions']:>10}  {human_bytes(figures['rendition_bytes'])}")
    click.echo(f"dedup ratio    {'-' if ratio is None else f'{ratio:.2f}':>10}")
    click.echo(f"open uploads   {figures['open_uploads']:>10}")
    click.echo("due for cleanup")
    click.echo(
        f"  expired artifacts     {due['expired_artifacts']:>8}  {human_bytes(due['expired_artifact_bytes'])}"
    )
    click.echo(f"  expired uploads       {due['expired_uploads']:>8}")
    click.echo(f"  blobs past grace      {due['blobs_due']:>8}  {human_bytes(due['blob_bytes_due'])}")
    in_grace = due["unreferenced_blobs"] - (due["blobs_due"] - due["tombstoned_blobs"])
    click.echo(f"  unreferenced, in grace {in_grace:>7}")


@main.command("migrate")
@data_dir_option
@click.option("--database-url", default=None, help="Database URL (env BLOBSTORE_DATABASE_URL).")
def migrate_command(data_dir: str | None, database_url: str | None) -> None:
    """Bring the metadata database schema up to date (safe to run beside a server)."""
    settings = settings_from(data_dir=data_dir, database_url=database_url)
    if settings.is_embedded:
        prepare_data_dir(settings)
    url = settings.resolved_database_url
    try:
        before = current_revision(url)
        upgrade(url)
        after = current_revision(url)
    except (BlobstoreError, OSError) as exc:
        fail(describe_error(exc))
    if before == after:
        click.echo(f"database already at revision {after}")
    else:
        click.echo(f"database migrated from {before or 'empty'} to {after}")

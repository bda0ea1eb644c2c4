"""Transfer commands against a running server: ``upload``, ``download``, ``ls``, ``info``, ``rm``.

Every command takes ``--url`` (env ``BLOBSTORE_URL``) and ``--token`` (env ``BLOBSTORE_TOKEN``, sent as a
bearer token and never printed), prints machine-readable results with ``--json``, and fails with exit status 1
and one line ``blobstore: <reason> (<code>)`` on stderr.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from blobstore.cli import main
from blobstore.cli.common import describe_error, echo_json, fail
from blobstore.client import DEFAULT_URL, ArtifactInfo, AsyncBlobstoreClient, ProgressCallback
from blobstore.errors import BlobstoreError
from blobstore.units import human_bytes

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

_SIZE = re.compile(r"(\d+)\s*([kmg]?)i?b?", re.IGNORECASE)
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def parse_size(text: str) -> int:
    """``8388608``, ``8M``, ``8MiB``, ``512k`` → bytes."""
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise click.BadParameter(f"not a size: {text!r} (use e.g. 8388608, 8M or 8MiB)")
    return int(match.group(1)) * _UNITS[match.group(2).lower()]


def server_options(func: F) -> F:
    func = click.option(
        "--token",
        envvar="BLOBSTORE_TOKEN",
        default=None,
        show_envvar=True,
        help="Bearer token.",
    )(func)
    func = click.option(
        "--url",
        envvar="BLOBSTORE_URL",
        default=DEFAULT_URL,
        show_default=True,
        show_envvar=True,
        help="Server base URL.",
    )(func)
    return click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON to stdout.")(
        func
    )


def progress_option(func: F) -> F:
    return click.option(
        "--progress/--no-progress",
        "show_progress",
        default=None,
        help="Progress bar on stderr (default: when stderr is a terminal).",
    )(func)


@contextmanager
def reporting_failures() -> Iterator[None]:
    try:
        yield
    except BlobstoreError as exc:
        fail(describe_error(exc))


def run_with_client(
    url: str,
    token: str | None,
    action: Callable[[AsyncBlobstoreClient], Awaitable[T]],
    *,
    on_interrupt: str | None = None,
) -> T:
    """Run ``action`` with a client; ``on_interrupt`` is the line to print when Ctrl-C stops it (exit 130)."""

    async def run() -> T:
        async with AsyncBlobstoreClient(url, token=token) as client:
            return await action(client)

    with reporting_failures():
        try:
            return anyio.run(run)
        except (KeyboardInterrupt, asyncio.CancelledError):
            # asyncio reports Ctrl-C as CancelledError when the main task was cancelled more than once
            # (anyio's cancel scopes): nothing else cancels the main task here.
            if on_interrupt is None:
                raise
            fail(on_interrupt, code=130)


class TransferProgress:
    """One rich bar per transfer with size, speed and ETA; a no-op when disabled."""

    def __init__(self, enabled: bool | None) -> None:
        forced = enabled is True
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        console = Console(stderr=True, force_terminal=True if forced else None)
        self._progress = Progress(
            TextColumn("{task.description}", markup=False),
            BarColumn(),
            DownloadColumn(binary_units=True),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=console,
            disable=not self.enabled,
        )

    def __enter__(self) -> TransferProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def callback(self, description: str) -> ProgressCallback:
        task: TaskID = self._progress.add_task(description, total=None)

        def update(done: int, total: int) -> None:
            self._progress.update(task, completed=done, total=total or None)

        return update


def _metadata(value: str | None) -> dict[str, Any] | None:
    if value is None:
        return None
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise click.BadParameter("must be a JSON object", param_hint="--metadata")
    return parsed


@main.command()
@click.argument(
    "files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option("--name", default=None, help="Artifact name (one file only; default: the file name).")
@click.option("--mime-type", default=None, help="MIME type (default: guessed from the file name).")
@click.option("--ttl", "ttl_seconds", type=click.IntRange(min=1), default=None, help="Lifetime in seconds.")
@click.option("--metadata", default=None, help="User metadata as a JSON object.")
@click.option("--chunk-size", default=None, help="Chunk size, e.g. 8M (default: the server's).")
@click.option(
    "--parallel", type=click.IntRange(1, 64), default=4, show_default=True, help="Chunks in flight."
)
@click.option("--no-resume", is_flag=True, help="Neither use nor keep resume state.")
@progress_option
@server_options
def upload(
    files: tuple[Path, ...],
    name: str | None,
    mime_type: str | None,
    ttl_seconds: int | None,
    metadata: str | None,
    chunk_size: str | None,
    parallel: int,
    no_resume: bool,
    show_progress: bool | None,
    as_json: bool,
    url: str,
    token: str | None,
) -> None:
    """Upload FILES in parallel chunks; run the same command again to resume an interrupted upload."""
    if name is not None and len(files) > 1:
        fail("--name needs exactly one file", code=2)
    user_metadata = _metadata(metadata)
    chunk_bytes = parse_size(chunk_size) if chunk_size is not None else None
    results: list[dict[str, Any]] = []

    async def action(client: AsyncBlobstoreClient) -> None:
        for path in files:
            # One bar per file, stopped before its result line is printed: a line written to the terminal
            # while a bar is live would land on the bar's line and the bar be drawn again below it.
            with TransferProgress(show_progress) as bars:
                result = await client.upload(
                    path,
                    name=name,
                    mime_type=mime_type,
                    ttl_seconds=ttl_seconds,
                    metadata=user_metadata,
                    chunk_size=chunk_bytes,
                    parallel=parallel,
                    resume=not no_resume,
                    progress=bars.callback(path.name),
                )
            results.append(result.summary())
            if not as_json:
                art = result.artifact
                resumed = f", resumed: {result.chunks_skipped} chunks already there" if result.resumed else ""
                click.echo(f"{art.id}  {human_bytes(art.size)}  {art.name}{resumed}")

    hint = (
        "interrupted; nothing was kept to resume (--no-resume)"
        if no_resume
        else "interrupted; run the same command again to resume the upload"
    )
    try:
        run_with_client(url, token, action, on_interrupt=hint)
    finally:
        if as_json:
            echo_json(results)


@main.command()
@click.argument("artifact_id")
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    default=Path(),
    help="File or directory to write to (default: the artifact's name in the current directory).",
)
@click.option("--offset", type=click.IntRange(min=0), default=None, help="First byte of a partial download.")
@click.option("--length", type=click.IntRange(min=0), default=None, help="Bytes of a partial download.")
@click.option("--no-resume", is_flag=True, help="Ignore a partial file from an earlier run.")
@progress_option
@server_options
def download(
    artifact_id: str,
    output: Path,
    offset: int | None,
    length: int | None,
    no_resume: bool,
    show_progress: bool | None,
    as_json: bool,
    url: str,
    token: str | None,
) -> None:
    """Download an artifact (resumes a partial file; verifies the SHA-256 of whole downloads)."""

    async def action(client: AsyncBlobstoreClient) -> dict[str, Any]:
        window: tuple[int, int] | None = None
        if offset is not None or length is not None:
            start = offset or 0
            if length is None:
                size = (await client.get_artifact(artifact_id)).size
                window = (start, max(start, size))
            else:
                window = (start, start + length)
        with TransferProgress(show_progress) as bars:
            result = await client.download(
                artifact_id,
                output,
                range=window,
                resume=not no_resume,
                progress=bars.callback(artifact_id),
            )
        return result.summary()

    hint = "interrupted; run the same command again to resume the download"
    if no_resume:
        hint = "interrupted; run the command again without --no-resume to resume the download"
    summary = run_with_client(url, token, action, on_interrupt=hint)
    if as_json:
        echo_json(summary)
    else:
        click.echo(f"{summary['path']}  {human_bytes(summary['end'] - summary['start'])}")


@main.command(name="ls")
@click.option(
    "--limit", type=click.IntRange(1, 1000), default=50, show_default=True, help="Artifacts per page."
)
@click.option("--cursor", default=None, help="Continue from a previous page's next_cursor.")
@click.option("--all", "all_pages", is_flag=True, help="Follow next_cursor through every page.")
@server_options
def list_command(
    limit: int, cursor: str | None, all_pages: bool, as_json: bool, url: str, token: str | None
) -> None:
    """List artifacts, newest first."""

    async def action(client: AsyncBlobstoreClient) -> tuple[list[ArtifactInfo], str | None]:
        items: list[ArtifactInfo] = []
        next_cursor = cursor
        while True:
            page = await client.list_artifacts(limit=limit, cursor=next_cursor)
            items.extend(page.items)
            next_cursor = page.next_cursor
            if not (all_pages and next_cursor):
                return items, next_cursor

    items, next_cursor = run_with_client(url, token, action)
    if as_json:
        echo_json({"items": [item.raw for item in items], "next_cursor": next_cursor})
        return
    for item in items:
        created = item.created_at.strftime("%Y-%m-%d %H:%M") if item.created_at else "-"
        click.echo(f"{item.id}  {human_bytes(item.size):>10}  {created}  {item.mime_type}  {item.name}")
    if next_cursor:
        click.echo(f"more: --cursor {next_cursor}", err=True)


@main.command()
@click.argument("artifact_id")
@server_options
def info(artifact_id: str, as_json: bool, url: str, token: str | None) -> None:
    """Show an artifact's metadata."""
    artifact = run_with_client(url, token, lambda client: client.get_artifact(artifact_id))
    if as_json:
        echo_json(artifact.raw)
        return
    rows = {
        "id": artifact.id,
        "uri": artifact.uri,
        "name": artifact.name,
        "mime_type": artifact.mime_type,
        "size": f"{artifact.size} ({human_bytes(artifact.size)})",
        "sha256": artifact.sha256,
        "created_at": artifact.created_at.isoformat() if artifact.created_at else "-",
        "expires_at": artifact.expires_at.isoformat() if artifact.expires_at else "never",
    }
    if artifact.media:
        rows["media"] = json.dumps(artifact.media, sort_keys=True)
    if artifact.metadata:
        rows["metadata"] = json.dumps(artifact.metadata, sort_keys=True)
    for key, value in rows.items():
        click.echo(f"{key + ':':<12}{value}")


@main.command()
@click.argument("artifact_ids", nargs=-1, required=True)
@server_options
def rm(artifact_ids: tuple[str, ...], as_json: bool, url: str, token: str | None) -> None:
    """Delete artifacts."""
    deleted: list[str] = []

    async def action(client: AsyncBlobstoreClient) -> None:
        for artifact_id in artifact_ids:
            await client.delete_artifact(artifact_id)
            deleted.append(artifact_id)
            if not as_json:
                click.echo(f"deleted {artifact_id}")

    try:
        run_with_client(url, token, action)
    finally:
        if as_json:
            echo_json([{"id": artifact_id, "deleted": True} for artifact_id in deleted])

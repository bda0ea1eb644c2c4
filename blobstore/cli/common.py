"""Shared CLI plumbing: settings from flags, one-line failures, JSON output."""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, NoReturn, TypeVar

import anyio
import click

from blobstore.errors import BlobstoreError, DatabaseNotMigrated

if TYPE_CHECKING:
    from blobstore.config import Settings

F = TypeVar("F", bound=Callable[..., Any])

HOST_PROFILE_NAMES: Final = (
    "claude-desktop",
    "claude-code",
    "vscode-copilot",
    "cursor",
    "gemini-cli",
    "generic",
)
"""The host profiles of the offloading proxy (``mcp_resources.proxy.rules.HOST_PROFILES``), named here so that
a command's options do not import the proxy."""
T = TypeVar("T")


def data_dir_option(func: F) -> F:
    return click.option(
        "--data-dir",
        type=click.Path(file_okay=False, path_type=str),
        default=None,
        help="Data directory (env BLOBSTORE_DATA_DIR).",
    )(func)


def fail(message: str, code: int = 1) -> NoReturn:
    click.echo(f"blobstore: {message}", err=True)
    sys.exit(code)


def parse_header(value: str) -> tuple[str, str]:
    """``'Name: value'`` as an HTTP header pair; ``ValueError`` for anything else."""
    name, sep, rest = value.partition(":")
    name = name.strip()
    if not sep or not name or any(c.isspace() for c in name):
        raise ValueError(f"expected 'Name: value', got {value!r}")
    return name, rest.strip()


def settings_from(**flags: Any) -> Settings:
    # Imported here: the transfer commands (upload, download) never load server settings, and importing
    # pydantic-settings was a third of their start-up time.
    from blobstore.config import SettingsError, load_settings

    try:
        return load_settings(**flags)
    except SettingsError as exc:
        fail(str(exc), code=2)


def echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, sort_keys=True, default=str))


def describe_error(exc: BaseException) -> str:
    if isinstance(exc, BlobstoreError):
        return f"{exc.message} ({exc.code})"
    return f"{type(exc).__name__}: {exc}"


def run_or_fail(action: Callable[[], Awaitable[T]]) -> T:
    """Run a command's async work; a store failure ends it with one line, a database that needs
    ``blobstore migrate`` with exit code 2 (the operator's setup, not the store, is at fault)."""
    try:
        return anyio.run(action)
    except DatabaseNotMigrated as exc:
        fail(exc.message, code=2)
    except (BlobstoreError, OSError) as exc:
        fail(describe_error(exc))

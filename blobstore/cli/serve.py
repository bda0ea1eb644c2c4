"""``blobstore serve``: run the HTTP API (with the MCP app at ``/mcp``) under an ASGI server.

Granian is the default: it sends whole-file downloads with the ASGI ``http.response.pathsend`` extension,
which measured fastest in ``bench/http_download.py``. uvicorn (installed with the package) and hypercorn (when
installed) remain available with ``--server``; ``--help`` offers only the servers that are installed.

Whichever runs, its own access log is off: the app writes one JSON line per request (``blobstore.access``,
:mod:`blobstore.api.observe`), which carries the request id, and a second line per request would only double
the log. So is uvicorn's handling of ``X-Forwarded-*``: the app does it for every server alike, from the
peers in ``BLOBSTORE_FORWARDED_ALLOW_IPS`` (:mod:`blobstore.api.request_guard`).
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import subprocess
import sys
from typing import Any, Final

import anyio
import click
from sqlalchemy.exc import SQLAlchemyError

from blobstore.auth import LOCAL_NAMESPACE
from blobstore.cli import main
from blobstore.cli.common import data_dir_option, describe_error, fail, settings_from
from blobstore.config import Settings
from blobstore.errors import BlobstoreError, StorageUnavailable
from blobstore.metadata.migrate import HEAD_REVISION, current_revision
from blobstore.runtime import count_active_tokens, disk_reserve, prepare_data_dir, prepare_to_serve

SERVERS: Final = ("granian", "uvicorn", "hypercorn")
DEFAULT_SERVER: Final = "granian"


def installed_servers() -> tuple[str, ...]:
    """The ASGI servers installed here (granian and uvicorn are dependencies; hypercorn is optional)."""
    return tuple(name for name in SERVERS if importlib.util.find_spec(name) is not None)


def _run_uvicorn(settings: Settings) -> None:
    import uvicorn

    from blobstore.asgi import build_app

    config = uvicorn.Config(
        build_app(settings),
        host=settings.host,
        port=settings.port,
        lifespan="on",
        log_level=settings.log_level,
        access_log=False,
        server_header=False,
        # The app takes a trusted proxy's X-Forwarded-* itself (blobstore.api.request_guard), as it does
        # under granian, which has no such handling: uvicorn's own would apply them first, by its own list.
        proxy_headers=False,
    )
    uvicorn.Server(config).run()


def _run_hypercorn(settings: Settings) -> None:
    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    from blobstore.asgi import build_app

    config = Config()
    host = settings.host if ":" not in settings.host else f"[{settings.host}]"
    config.bind = [f"{host}:{settings.port}"]
    config.loglevel = settings.log_level.upper()
    config.accesslog = None
    config.include_server_header = False
    asyncio.run(serve(build_app(settings), config))  # type: ignore[arg-type]


def settings_environment(settings: Settings) -> dict[str, str]:
    """Every setting given explicitly (flag or environment) as its ``BLOBSTORE_*`` variable."""
    env: dict[str, str] = {}
    for name, value in settings.model_dump(exclude_unset=True).items():
        if value is None:
            continue
        if isinstance(value, tuple | list):
            value = ",".join(str(item) for item in value)
        text = str(value).lower() if isinstance(value, bool) else str(value)
        env[f"BLOBSTORE_{name.upper()}"] = text
    # The data directory always travels: its default depends on the worker's own environment.
    env["BLOBSTORE_DATA_DIR"] = str(settings.data_dir)
    return env


APP_FACTORY: Final = "blobstore.asgi:app_from_env"


def load_app_from_env(target: str) -> Any:
    """granian's loader for ``target``, without the working directory put first on the import path.

    granian's own loader inserts the working directory at the front of ``sys.path`` before it imports the
    target, so ``serve`` started from a checkout of the project would run the checkout's ``blobstore/``
    instead of the installed package (which holds ``blobstore.migrations``, the checkout does not).
    The worker is forked from this process and already holds the installed modules; this imports them.
    """
    if target != APP_FACTORY:
        raise ValueError(f"unexpected granian target {target!r}")
    from blobstore.asgi import app_from_env

    return app_from_env()


def _run_granian(settings: Settings) -> None:
    from granian.constants import Interfaces
    from granian.log import LogLevels
    from granian.server import Server

    # The worker process builds the app from the environment (blobstore.asgi:app_from_env), so the settings
    # given as flags travel there as BLOBSTORE_* variables. One worker: SQLite mode allows one process.
    os.environ.update(settings_environment(settings))
    Server(
        APP_FACTORY,
        address=settings.host,
        port=settings.port,
        interface=Interfaces.ASGI,
        workers=1,
        log_level=LogLevels(settings.log_level),
        log_access=False,
    ).serve(target_loader=load_app_from_env)


def first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def last_line(text: str) -> str:
    """The line a failing child ends its stderr with: its one-line error, or a traceback's exception."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else text


MIGRATE_URL_VARIABLE: Final = "BLOBSTORE_MIGRATE_DATABASE_URL"


def migrate_apart(settings: Settings) -> None:
    """Apply pending migrations in a short-lived child process; nothing to do (no child) at the newest one.

    granian forks its worker from this process, so the worker carries whatever this process loaded. Alembic
    (with Mako and Pygments, about 10 MiB resident) is needed only to migrate, so it loads in a child that
    exits, and the ``upgrade`` of :func:`prepare_to_serve` then finds the schema up to date without it.
    """
    prepare_data_dir(settings)
    url = settings.resolved_database_url
    if current_revision(url) == HEAD_REVISION:
        return
    code = f"from blobstore.cli.migrating import migrate_child; migrate_child({MIGRATE_URL_VARIABLE!r})"
    # Through the environment, not argv: the URL may hold a password.
    env = {**os.environ, MIGRATE_URL_VARIABLE: url}
    # -P: ``python -c`` would put the working directory first on the import path, and a checkout of the
    # project there would shadow the installed package (the checkout has no ``blobstore.migrations``).
    result = subprocess.run([sys.executable, "-P", "-c", code], env=env, capture_output=True, text=True)
    if result.returncode != 0:
        fail(f"cannot migrate the metadata database: {last_line(result.stderr or 'the migration failed')}")


_RUNNERS: Final = {"uvicorn": _run_uvicorn, "hypercorn": _run_hypercorn, "granian": _run_granian}


@main.command()
@click.option("--host", default=None, help="Address to listen on (env BLOBSTORE_HOST; default 127.0.0.1).")
@click.option("--port", type=int, default=None, help="Port (env BLOBSTORE_PORT; default 8420).")
@data_dir_option
@click.option(
    "--server",
    "server_name",
    type=click.Choice(installed_servers()),
    default=DEFAULT_SERVER,
    show_default=True,
    help="ASGI server to run the app under.",
)
@click.option(
    "--cleanup-interval",
    type=click.IntRange(min=1),
    default=None,
    help="Run the cleanup job every N seconds in this process (env BLOBSTORE_CLEANUP_INTERVAL_SECONDS).",
)
@click.option(
    "--insecure-no-auth",
    is_flag=True,
    default=None,
    help="Allow a non-loopback address while no token exists (anyone can then read and write).",
)
@click.option(
    "--cors-origins",
    default=None,
    metavar="ORIGINS",
    help="Comma-separated origins (http(s)://host[:port]) whose browser pages may call this server "
    "(env BLOBSTORE_CORS_ORIGINS; default: none, no CORS).",
)
def serve(
    host: str | None,
    port: int | None,
    data_dir: str | None,
    server_name: str,
    cleanup_interval: int | None,
    insecure_no_auth: bool | None,
    cors_origins: str | None,
) -> None:
    """Serve the HTTP API and the MCP endpoint."""
    settings = settings_from(
        host=host,
        port=port,
        data_dir=data_dir,
        insecure_no_auth=insecure_no_auth,
        cleanup_interval_seconds=cleanup_interval,
        cors_origins=cors_origins,
    )
    for name, why in settings.ignored_settings.items():
        click.echo(f"blobstore: {name} is ignored: {why}.", err=True)
    reserve = disk_reserve(settings, server=True)
    try:
        if reserve is not None:
            reserve.release_if_full()
        migrate_apart(settings)
        probed = anyio.run(prepare_to_serve, settings)
    except StorageUnavailable as exc:
        fail(f"storage check failed: {exc.message}")
    except (BlobstoreError, OSError, SQLAlchemyError) as exc:
        fail(f"cannot migrate the metadata database: {first_line(describe_error(exc))}")
    if probed is not None:
        click.echo(f"blobstore: {probed}", err=True)
    try:
        tokens = anyio.run(count_active_tokens, settings)
    except (BlobstoreError, OSError, SQLAlchemyError) as exc:
        fail(f"cannot read the tokens from the metadata database: {describe_error(exc)}")
    if tokens == 0:
        if not settings.binds_loopback_only and not settings.insecure_no_auth:
            fail(
                f"refusing to listen on {settings.host} without authentication: no token exists; "
                "create one with 'blobstore token create', bind a loopback address, "
                "or pass --insecure-no-auth",
                code=2,
            )
        where = "for loopback clients only" if not settings.insecure_no_auth else "for EVERY client"
        click.echo(
            f"blobstore: local mode: no token exists, so requests without a token act in namespace "
            f"'{LOCAL_NAMESPACE}' with every scope, {where}. Create a token to require authentication.",
            err=True,
        )
    else:
        click.echo(f"blobstore: {tokens} active token(s): every request needs a bearer token.", err=True)
    _RUNNERS[server_name](settings)

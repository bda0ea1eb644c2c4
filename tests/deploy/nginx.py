"""The shipped ``deploy/nginx.conf`` and ``deploy/nginx-single.conf``, rendered for a test: only their listen
port, upstream servers and (for the single server) the storage directory change.

The shipped file is a ``conf.d`` server block; :func:`main_config` wraps it in a main configuration that keeps
every path inside a temporary directory, so ``nginx`` runs unprivileged of the machine's own setup.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx

from tests.fixtures.server import stop_process
from tests.fixtures.waiting import wait_until

SHIPPED = Path(__file__).resolve().parents[2] / "deploy" / "nginx.conf"
SHIPPED_SINGLE = SHIPPED.with_name("nginx-single.conf")
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"

_UPSTREAM_SERVER = re.compile(r"^(\s*server\s+)blobstore-\d+:8420(\s)", re.MULTILINE)
_LISTEN = re.compile(r"^(\s*listen\s+)80;", re.MULTILINE)
_SINGLE_UPSTREAM = re.compile(r"^(\s*server\s+)127\.0\.0\.1:8420;", re.MULTILINE)
_STORAGE_ALIAS = re.compile(r"^(\s*alias\s+)/var/lib/mcp-blobstore/blobs/;", re.MULTILINE)


def render_site(listen_port: int, upstream_ports: Sequence[int], text: str | None = None) -> str:
    """The shipped server block with ``listen`` on ``listen_port`` and the upstream servers on loopback."""
    site = SHIPPED.read_text() if text is None else text
    servers = _UPSTREAM_SERVER.findall(site)
    if len(servers) != len(upstream_ports):
        raise AssertionError(
            f"deploy/nginx.conf has {len(servers)} upstream servers, not {len(upstream_ports)}"
        )
    ports = iter(upstream_ports)
    site = _UPSTREAM_SERVER.sub(lambda match: f"{match[1]}127.0.0.1:{next(ports)}{match[2]}", site)
    site, listens = _LISTEN.subn(rf"\g<1>127.0.0.1:{listen_port};", site)
    if listens != 1:
        raise AssertionError("deploy/nginx.conf should have exactly one 'listen 80;'")
    return site


def render_single_site(listen_port: int, upstream_port: int, storage_dir: Path) -> str:
    """The shipped single-server block on loopback ports, its internal location aliased to ``storage_dir``."""
    site = SHIPPED_SINGLE.read_text()
    for pattern, replacement in (
        (_SINGLE_UPSTREAM, f"\\g<1>127.0.0.1:{upstream_port};"),
        (_LISTEN, f"\\g<1>127.0.0.1:{listen_port};"),
        (_STORAGE_ALIAS, f"\\g<1>{storage_dir}/;"),
    ):
        site, count = pattern.subn(replacement, site)
        if count != 1:
            raise AssertionError(f"deploy/nginx-single.conf should match {pattern.pattern} exactly once")
    return site


def main_config(root: Path, site: str) -> Path:
    """Write ``site`` and a main configuration around it under ``root``; return the main file."""
    (root / "site.conf").write_text(site)
    temp = {name: root / name for name in ("body", "proxy", "fastcgi", "uwsgi", "scgi")}
    for path in temp.values():
        path.mkdir(exist_ok=True)
    main = root / "nginx.conf"
    main.write_text(
        f"""
user root;
worker_processes 1;
pid {root / "nginx.pid"};
error_log {root / "error.log"} info;
events {{ worker_connections 256; }}
http {{
    access_log {root / "access.log"};
    client_body_temp_path {temp["body"]};
    proxy_temp_path {temp["proxy"]};
    fastcgi_temp_path {temp["fastcgi"]};
    uwsgi_temp_path {temp["uwsgi"]};
    scgi_temp_path {temp["scgi"]};
    include {root / "site.conf"};
}}
"""
    )
    return main


def command(root: Path, main: Path, *args: str) -> list[str]:
    return [NGINX, "-p", str(root), "-c", str(main), "-e", str(root / "error.log"), *args]


@contextlib.contextmanager
def running(root: Path, site: str, port: int, *, within: float) -> Iterator[str]:
    """nginx in the foreground on ``site`` (listening on ``port``) under ``root``: its URL once ``/healthz``
    answers through it, within ``within`` seconds; a process that exits first fails with its error log."""
    main = main_config(root, site)
    process = subprocess.Popen(command(root, main, "-g", "daemon off;"), start_new_session=True)
    url = f"http://127.0.0.1:{port}"

    def answering() -> bool:
        if process.poll() is not None:
            raise AssertionError((root / "error.log").read_text(errors="replace"))
        try:
            return httpx.get(f"{url}/healthz", timeout=5).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_until(answering, within=within, what="nginx")
        yield url
    finally:
        stop_process(process)


PASSED_ON: tuple[str, ...] = (
    "etag",
    "last-modified",
    "cache-control",
    "content-type",
    "content-disposition",
    "x-content-type-options",
    "content-security-policy",
)
"""The server's headers of a whole download that nginx sends with the file (``deploy/nginx-single.conf``)."""

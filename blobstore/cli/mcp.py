"""``blobstore mcp``: serve the store over MCP on stdin/stdout, for host configs such as Claude Desktop's.

The host starts this as a subprocess; stdout carries the protocol, so nothing else may write there (fd 1
points at stderr while serving). The event loop reads stdin and writes stdout itself
(:mod:`mcp_resources.transports.stdio`), so a request costs no thread handoff on its way in or out. The data
directory is opened without the server lock, like the admin commands, so a desktop host can run it beside
``blobstore serve`` on the same data directory.
"""

from __future__ import annotations

import anyio
import click

from blobstore.cli import main
from blobstore.cli.common import data_dir_option, describe_error, fail, settings_from
from blobstore.config import Settings
from blobstore.errors import BlobstoreError
from blobstore.models import Caller


async def serve_stdio(settings: Settings) -> None:
    from blobstore.runtime import open_service
    from mcp_resources.transports.server import create_stdio_server
    from mcp_resources.transports.stdio import serve_on_stdio

    # A server, like `blobstore serve`: it brings the schema up to date before it serves.
    async with open_service(settings, migrate=True) as service:
        caller = Caller(namespace=settings.mcp_namespace, actor="mcp-stdio")
        server, reads = create_stdio_server(service, caller)
        await serve_on_stdio(server, reads=reads)


@main.command("mcp")
@data_dir_option
@click.option(
    "--namespace", default=None, help="Namespace to list, read and upload in (env BLOBSTORE_MCP_NAMESPACE)."
)
def mcp_command(data_dir: str | None, namespace: str | None) -> None:
    """Serve the artifact store over MCP on stdio."""
    from blobstore.allocator import keep_freed_memory

    settings = settings_from(data_dir=data_dir, mcp_namespace=namespace)
    keep_freed_memory()
    try:
        anyio.run(serve_stdio, settings)
    except BlobstoreError as exc:
        fail(describe_error(exc))

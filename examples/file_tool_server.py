"""An MCP tool server whose tool takes a file: ``checksum_image(image)`` returns the SHA-256, size and pixel
size of the image it was given.

``image`` is a file parameter (:class:`~mcp_resources.embed.FileInput`), so a caller passes it in any of
the forms the store knows: an artifact URI (``blobstore://artifacts/{id}``, e.g. the ``resource_link`` of an
earlier tool's screenshot), a ``data:`` URL, inline base64, ``{"upload_id": …}`` of an upload committed with
the upload tools this server also offers, an ``https://`` URL, or ``{"download_url": …, "file_id": …}`` from
ChatGPT, both fetched only from the origins ``BLOBSTORE_FILE_DOWNLOAD_ORIGINS`` lists (and only from public
addresses unless ``BLOBSTORE_FILE_DOWNLOAD_NETWORKS`` says otherwise). The tool reads it as a stream and as a
file.

Run it as a stdio server (host config: command ``python``, args ``["examples/file_tool_server.py"]``), or over
streamable HTTP with ``--http 127.0.0.1:8421`` (endpoint ``http://127.0.0.1:8421/mcp``). It uses the store the
``BLOBSTORE_*`` variables name and reads and stores in the namespace ``BLOBSTORE_MCP_NAMESPACE`` (default
``default``), so the artifacts ``blobstore serve`` and ``blobstore mcp`` hold on the same data directory can
be passed to it by URI.
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

import anyio
from mcp.server import MCPServer
from PIL import Image
from pydantic import BaseModel

from blobstore.config import load_settings
from blobstore.models import Caller
from blobstore.runtime import open_service
from blobstore.service import ArtifactService
from mcp_resources.embed import FileInput, embed_store


class Checksum(BaseModel):
    sha256: str
    size: int
    width: int
    height: int
    mime_type: str | None


def pixel_size(path: Path) -> tuple[int, int]:
    with Image.open(path) as image:
        return image.size


def build_server(service: ArtifactService, namespace: str = "default") -> MCPServer:
    mcp = MCPServer("image-checker")
    embed_store(mcp, service, caller=Caller(namespace=namespace), tools=True)

    @mcp.tool()
    async def checksum_image(image: FileInput) -> Checksum:
        """The SHA-256, size in bytes and pixel size of an image."""
        digest = hashlib.sha256()
        async for piece in image.stream():
            digest.update(piece)
        async with image.path() as path:
            width, height = await anyio.to_thread.run_sync(pixel_size, path)
        return Checksum(
            sha256=digest.hexdigest(), size=image.size, width=width, height=height, mime_type=image.mime_type
        )

    return mcp


async def main(http: str | None) -> None:
    settings = load_settings()
    async with open_service(settings) as service:
        server = build_server(service, settings.mcp_namespace)
        if http is None:
            await server.run_stdio_async()
            return
        host, _, port = http.rpartition(":")
        await server.run_streamable_http_async(
            host=host, port=int(port), stateless_http=True, json_response=True
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", metavar="HOST:PORT", help="serve streamable HTTP at http://HOST:PORT/mcp")
    anyio.run(main, parser.parse_args().http)

"""An MCP tool server that renders a PNG, stores it in the artifact store and returns tool_result_for(...).

Run it as a stdio server (host config: command ``python``, args ``["examples/image_tool_server.py"]``). It
uses the store configured by ``BLOBSTORE_*`` variables (``BLOBSTORE_DATA_DIR``, or a database and storage
URL) and stores its PNGs in the namespace ``BLOBSTORE_MCP_NAMESPACE``, by default ``default``: the namespace
``blobstore serve`` acts in while no token exists and ``blobstore mcp`` reads. So on the same data directory
``blobstore ls`` (against ``blobstore serve``) and ``blobstore mcp`` list the same PNGs. To keep them apart,
set ``BLOBSTORE_MCP_NAMESPACE=heatmaps`` and read them with ``blobstore mcp --namespace heatmaps``, or over
HTTP with a token of that namespace (``blobstore token create --namespace heatmaps``).
"""

from __future__ import annotations

import io
import random

import anyio
from mcp.server import MCPServer
from mcp.types import CallToolResult
from PIL import Image

from blobstore.config import load_settings
from blobstore.models import Caller
from blobstore.runtime import open_service
from blobstore.service import ArtifactService
from mcp_resources.embed import embed_store


def draw_heatmap(width: int, height: int, cell: int, seed: int) -> bytes:
    rng = random.Random(seed)
    cols, rows = -(-width // cell), -(-height // cell)
    grid = Image.frombytes("RGB", (cols, rows), rng.randbytes(cols * rows * 3))
    out = io.BytesIO()
    grid.resize((cols * cell, rows * cell), Image.Resampling.NEAREST).crop((0, 0, width, height)).save(
        out, "PNG"
    )
    return out.getvalue()


def build_server(service: ArtifactService, namespace: str = "default") -> MCPServer:
    mcp = MCPServer("heatmap-renderer")
    store = embed_store(mcp, service, caller=Caller(namespace=namespace))

    @mcp.tool()
    async def render_heatmap(
        width: int = 640, height: int = 360, cell: int = 40, seed: int = 0
    ) -> CallToolResult:
        """Render a random heatmap PNG (cells of `cell` px) and return it, or a link to it when large."""
        png = await anyio.to_thread.run_sync(draw_heatmap, width, height, cell, seed)
        artifact = await store.put(png, name=f"heatmap-{seed}.png", mime_type="image/png")
        return await store.tool_result_for(
            artifact, summary=f"Heatmap {width}x{height} px, {cell} px cells, seed {seed}."
        )

    return mcp


async def main() -> None:
    settings = load_settings()
    async with open_service(settings) as service:
        await build_server(service, settings.mcp_namespace).run_stdio_async()


if __name__ == "__main__":
    anyio.run(main)

"""An MCP tool server whose tools take and return typed media: ``analyze_image``, ``generate_image`` and
``transcribe_audio``.

``Image`` and ``Audio`` parameters (:mod:`mcp_resources.embed`) take a file in any form the store knows (an
artifact URI, a ``data:`` URL, base64, ``{"upload_id": …}`` of an upload committed with this server's upload
tools, an ``https://`` URL or ChatGPT's ``{"download_url": …, "file_id": …}`` from the origins
``BLOBSTORE_FILE_DOWNLOAD_ORIGINS`` lists), checked before the tool runs: the format sniffed from the bytes,
the size and the pixels or seconds in the annotation. An ``Image`` result is stored as an artifact and comes
back inline (downscaled) or as a ``resource_link``.

There is no model behind these tools: ``analyze_image`` reports what the pixels say (format, size, the
dominant colour), and ``transcribe_audio`` reports the recording's facts (what it says is the store's
transcript view, ``read_artifact(uri, transcript=true)``); each tool's description says so.

Run it as a stdio server (host config: command ``python``, args ``["examples/media_tool_server.py"]``), or
over streamable HTTP with ``--http 127.0.0.1:8422`` (endpoint ``http://127.0.0.1:8422/mcp``). It uses the
store the ``BLOBSTORE_*`` variables name, in the namespace ``BLOBSTORE_MCP_NAMESPACE`` (default
``default``).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import random
from pathlib import Path
from typing import Annotated

import anyio
from mcp.server import MCPServer
from PIL import Image as Pillow
from PIL import ImageDraw

from blobstore.config import load_settings
from blobstore.models import Caller
from blobstore.runtime import open_service
from blobstore.service import ArtifactService
from mcp_resources.embed import Audio, Image, MediaLimits, embed_store

Picture = Annotated[
    Image, MediaLimits(max_bytes="10MB", formats=("png", "jpeg", "webp", "gif"), max_pixels=40_000_000)
]
Recording = Annotated[Audio, MediaLimits(formats=("mp3", "wav", "ogg", "flac"), max_seconds=4 * 3600)]
STYLES = {"realistic": (0.9, 0.8), "sketch": (0.2, 1.0), "neon": (1.0, 1.0)}
"""Saturation and lightness of each style's bands; ``noise`` draws random pixels instead."""


def dominant_colour(path: Path) -> tuple[int, int, int]:
    """The most frequent colour of the image seen at 64 px (a palette of 16)."""
    with Pillow.open(path) as opened:
        small = opened.convert("RGB")
        small.thumbnail((64, 64))
    counts = small.quantize(16).convert("RGB").getcolors(64 * 64) or [(1, (0, 0, 0))]
    colour = max(counts, key=lambda item: item[0])[1]
    r, g, b = colour if isinstance(colour, tuple) else (colour, colour, colour)
    return int(r), int(g), int(b)


def draw(prompt: str, style: str, width: int, height: int) -> bytes:
    """A picture made from the prompt's digest: bands of colour and the prompt written on them."""
    seed = hashlib.sha256(f"{style}:{prompt}".encode()).digest()
    if style == "noise":
        # Pixels that do not compress: even downscaled, more than a result carries inline.
        noise = Pillow.frombytes("RGB", (width, height), random.Random(seed).randbytes(width * height * 3))
        out = io.BytesIO()
        noise.save(out, "PNG")
        return out.getvalue()
    saturation, light = STYLES.get(style, STYLES["realistic"])
    image = Pillow.new("RGB", (width, height))
    pen = ImageDraw.Draw(image)
    bands = 8
    for band in range(bands):
        r, g, b = (round(seed[band * 3 + i] * saturation * light) for i in range(3))
        pen.rectangle((0, band * height // bands, width, (band + 1) * height // bands), fill=(r, g, b))
    pen.text((10, 10), prompt[:80], fill=(255, 255, 255))
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def build_server(service: ArtifactService, namespace: str = "default") -> MCPServer:
    mcp = MCPServer("media-tools")
    embed_store(mcp, service, caller=Caller(namespace=namespace), tools=True)

    @mcp.tool()
    async def analyze_image(image: Picture, question: str = "") -> str:
        """What the pixels of an image say: its format, pixel size and dominant colour. No vision model
        runs here; the question is answered with these facts only."""
        await image.facts()
        async with image.path() as path:
            r, g, b = await anyio.to_thread.run_sync(dominant_colour, path)
        asked = f" Asked: {question}" if question else ""
        return (
            f"{image.format.upper() if image.format else 'image'}, {image.width}x{image.height} px, "
            f"{image.size} bytes, dominant colour #{r:02x}{g:02x}{b:02x}.{asked}"
        )

    @mcp.tool()
    async def generate_image(
        prompt: str, style: str = "realistic", width: int = 512, height: int = 512
    ) -> Image:
        """Draw a picture for a prompt (bands of colour from the prompt, the prompt written on them):
        style is realistic, sketch, neon or noise (random pixels); width and height in pixels, 16 to 4096."""
        width, height = max(16, min(width, 4096)), max(16, min(height, 4096))
        png = await anyio.to_thread.run_sync(draw, prompt, style, width, height)
        slug = "-".join(prompt.lower().split())[:40] or "image"
        return Image(data=png, format="png", name=f"{slug}.png")

    @mcp.tool()
    async def transcribe_audio(audio: Recording) -> str:
        """The facts of a recording: duration, sample rate, channels and format. It does not transcribe:
        no words are returned; read_artifact(uri, transcript=true) reads what a stored recording says."""
        return (
            f"No transcript from this tool (read_artifact(uri, transcript=true) gives one). The recording: "
            f"{audio.duration:.1f} s, "
            f"{audio.sample_rate} Hz, {audio.channels} channel{'s' if audio.channels != 1 else ''}, "
            f"{audio.format}, {audio.size} bytes."
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

"""What each host profile gets from a typed media result, measured: the table of docs/mcp.md, "Platforms".

For every host profile the store knows (``blobstore proxy --host-profile``), it stores one sample of each kind
made by real encoders, a 1920x1080 screenshot (PNG), a 3000x2000 photo (JPEG), 10 s and 60 s of speech-like
audio (16 kHz mono WAV), a 5 s video (H.264 MP4) and a 3-page PDF, and answers each with the store's rules
under that profile's caps (``tool_result_for`` with the profile's inline limit, as a typed result is
answered), then prints what the host receives: the blocks, the pixel size of an inline image and the
estimated tokens, and the largest window the profile reads.

    .venv/bin/python bench/media_platforms.py
"""

from __future__ import annotations

import io
import math
import struct
import tempfile
import wave
from collections.abc import AsyncIterator, Callable
from fractions import Fraction
from pathlib import Path

import anyio
import av
import pypdfium2 as pdfium
from PIL import Image, ImageDraw

from blobstore.config import Settings
from blobstore.models import Artifact, Caller
from blobstore.runtime import open_service
from blobstore.service import ArtifactService
from blobstore.tokens import estimate_audio_tokens, estimate_image_tokens
from mcp_resources.proxy.rules import HOST_PROFILES
from mcp_resources.results.content import tool_result_for

CALLER = Caller(namespace="default")


def screenshot() -> bytes:
    image = Image.new("RGB", (1920, 1080), (245, 245, 245))
    pen = ImageDraw.Draw(image)
    for row in range(0, 1080, 24):
        pen.text((20, row), f"line {row // 24}: a window of text, as a screen shows it", fill=(20, 20, 20))
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def photo() -> bytes:
    image = Image.radial_gradient("L").resize((3000, 2000)).convert("RGB")
    out = io.BytesIO()
    image.save(out, "JPEG", quality=90)
    return out.getvalue()


def speech(seconds: int) -> bytes:
    rate = 16_000
    samples = [
        round(6000 * math.sin(2 * math.pi * (180 + 40 * (i // 4000 % 5)) * i / rate)) for i in range(rate)
    ]
    second = struct.pack(f"<{rate}h", *samples)
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(rate)
        wav.writeframes(second * seconds)
    return out.getvalue()


def video(seconds: int = 5) -> bytes:
    out = io.BytesIO()
    with av.open(out, "w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=10)
        assert isinstance(stream, av.VideoStream)
        stream.width, stream.height, stream.pix_fmt = 640, 360, "yuv420p"
        for number in range(seconds * 10):
            picture = Image.new("RGB", (640, 360), (number * 5 % 256, 80, 160))
            frame = av.VideoFrame.from_image(picture)  # type: ignore[no-untyped-call]
            frame.pts = number
            frame.time_base = Fraction(1, 10)
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return out.getvalue()


def pdf(pages: int = 3) -> bytes:
    document = pdfium.PdfDocument.new()
    try:
        for _ in range(pages):
            document.new_page(612, 792).close()
        out = io.BytesIO()
        document.save(out)
        return out.getvalue()
    finally:
        document.close()


SAMPLES: dict[str, tuple[str, Callable[[], bytes]]] = {
    "screenshot 1920x1080 PNG": ("screen.png", screenshot),
    "photo 3000x2000 JPEG": ("photo.jpg", photo),
    "10 s WAV (16 kHz mono)": ("note.wav", lambda: speech(10)),
    "60 s WAV (16 kHz mono)": ("talk.wav", lambda: speech(60)),
    "5 s MP4 (640x360)": ("clip.mp4", video),
    "3-page PDF": ("report.pdf", pdf),
}


async def _one(data: bytes) -> AsyncIterator[bytes]:
    yield data


def answered(artifact: Artifact, kinds: list[str], meta: dict[str, int]) -> str:
    """The blocks a host receives for ``artifact``, in a few words."""
    if "image" in kinds:
        width, height = meta["width"], meta["height"]
        return f"inline {width}x{height}, ~{estimate_image_tokens(width, height)} tokens"
    if "audio" in kinds:
        seconds = float(artifact.media.get("duration_seconds") or 0)
        return f"inline audio, ~{estimate_audio_tokens(seconds)} tokens"
    return "resource_link + view hint" if "resource_link" in kinds else "+".join(kinds)


async def measure(service: ArtifactService) -> list[str]:
    stored: dict[str, Artifact] = {}
    for label, (name, make) in SAMPLES.items():
        data = make()
        stored[label] = await service.create_artifact(CALLER, _one(data), name=name, expected_size=len(data))
    header = ["profile", *SAMPLES, "read window"]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    for name, profile in HOST_PROFILES.items():
        limit = profile.inline_limit(service.settings.inline_limit)
        cells = [f"`{name}`"]
        for label in SAMPLES:
            artifact = stored[label]
            result = await tool_result_for(artifact, service=service, caller=CALLER, inline_limit=limit)
            kinds: list[str] = [block.type for block in result.content[1:]]
            meta: dict[str, int] = {}
            for block in result.content:
                if block.type == "image":
                    found = (block.meta or {}).get("dev.blobstore/artifact", {})
                    meta = {
                        "width": int(found.get("width") or artifact.media["width"]),
                        "height": int(found.get("height") or artifact.media["height"]),
                    }
            cells.append(answered(artifact, kinds, meta))
        cells.append(f"{profile.window_max() // 1024} KiB")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


async def main() -> None:
    with tempfile.TemporaryDirectory(prefix="media-platforms-") as root:
        async with open_service(Settings(data_dir=Path(root) / "data")) as service:
            print("\n".join(await measure(service)))


if __name__ == "__main__":
    anyio.run(main)

"""Typed media arguments: what an ``Image`` or ``Audio`` parameter costs a call against a plain ``FileInput``.

On a fresh data directory it makes a 20 MiB PNG (noise, 2650 px square: what does not compress) and a
one-hour recording, as 16 kHz mono WAV and as MP3 (FFmpeg's encoder), stores each as an artifact, and calls
tools of an ``MCPServer`` that embeds the store, through the official client on an in-memory connection,
with the artifact's URI:

- ``FileInput``: the plain file parameter (the tool touches nothing);
- typed: ``Image`` / ``Audio`` without limits on facts (the format sniffed from the first 4 KiB, nothing
  decoded);
- typed, facts read: the same tool awaiting ``facts()`` (a decoder worker checks and measures the media), on a
  fresh view cache, then again (the facts of an artifact are cached by its content).

For each it reports the median wall time of ``--runs`` calls, the most memory Python held during one more
call above what it held before (tracemalloc, in a pass of its own), and the decoder workers' peak RSS (the
largest ``ru_maxrss`` of the processes the probes started).

    .venv/bin/python bench/media_args.py                          # 20 MiB image, one hour of audio
    .venv/bin/python bench/media_args.py --image-mib 2 --hours 0.05 --runs 1   # a quick one
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import statistics
import struct
import tempfile
import time
import tracemalloc
import wave
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from fractions import Fraction
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import anyio
import av
from mcp import Client
from mcp.server import MCPServer
from PIL import Image as Pillow

from blobstore.config import Settings
from blobstore.models import Caller
from blobstore.runtime import open_service
from blobstore.service import ArtifactService
from mcp_resources.embed import Audio, FileInput, Image, MediaLimits, embed_store

CALLER = Caller(namespace="default")
RATE = 16_000
MiB = 1024 * 1024
LARGE = MediaLimits(max_bytes="1GiB")
"""Both files are over the default BLOBSTORE_MEDIA_MAX_BYTES of 100 MiB in their WAV form."""
BigImage = Annotated[Image, LARGE]
BigAudio = Annotated[Audio, LARGE]


def write_png(path: Path, mib: float) -> None:
    """Noise of about ``mib`` MiB as PNG (noise does not compress, so the file is its pixels)."""
    edge = max(16, round(math.sqrt(mib * MiB / 3)))
    Pillow.frombytes("RGB", (edge, edge), random.Random(1).randbytes(edge * edge * 3)).save(path, "PNG")


def _tone(seconds: int) -> bytes:
    count = seconds * RATE
    return struct.pack(
        f"<{count}h", *(round(8000 * math.sin(2 * math.pi * 440 * i / RATE)) for i in range(count))
    )


def write_wav(path: Path, hours: float) -> None:
    block = _tone(10)
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(RATE)
        for _ in range(math.ceil(hours * 3600 / 10)):
            out.writeframes(block)


def write_mp3(path: Path, hours: float) -> None:
    block = _tone(10) * 2
    total = round(hours * 3600 * RATE)
    with av.open(str(path), "w", format="mp3") as container:
        stream = container.add_stream("libmp3lame", rate=RATE, layout="mono")
        assert isinstance(stream, av.AudioStream)
        stream.format = "s16p"
        for start in range(0, total, 1152):
            count = min(1152, total - start)
            offset = 2 * (start % (10 * RATE))
            frame = av.AudioFrame(format="s16p", layout="mono", samples=count)
            frame.planes[0].update(block[offset : offset + 2 * count])
            frame.rate = RATE
            frame.pts = start
            frame.time_base = Fraction(1, RATE)
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)


def server(service: ArtifactService) -> MCPServer:
    mcp = MCPServer("bench")
    embed_store(mcp, service, caller=CALLER)

    @mcp.tool()
    async def plain(file: FileInput) -> int:
        """The plain file parameter."""
        return file.size

    @mcp.tool()
    async def image(image: BigImage, facts: bool = False) -> int:
        """A typed image."""
        if facts:
            await image.facts()
        return image.size

    @mcp.tool()
    async def audio(audio: BigAudio, facts: bool = False) -> int:
        """A typed recording."""
        if facts:
            await audio.facts()
        return audio.size

    return mcp


async def timed(call: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await call()
    return time.perf_counter() - started


async def allocated(call: Callable[[], Awaitable[Any]]) -> int:
    """The most memory Python held during ``call`` above what it held before (tracemalloc, in a pass of
    its own: tracing slows every allocation, so the timed calls run without it)."""
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        await call()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return max(0, peak - before)


async def forget_views(service: ArtifactService) -> None:
    """Delete every cached view and probe, so that the next one decodes again."""
    beyond = service.clock() + timedelta(days=365 * 100)
    while await service.repo.remove_renditions(now=beyond, limit=500):
        pass


async def _chunks(path: Path) -> AsyncIterator[bytes]:
    with path.open("rb") as file:
        while piece := file.read(MiB):
            yield piece


async def bench(root: Path, image_mib: float, hours: float, runs: int) -> dict[str, Any]:
    files = {"image": root / "noise.png", "wav": root / "hour.wav", "mp3": root / "hour.mp3"}
    write_png(files["image"], image_mib)
    write_wav(files["wav"], hours)
    write_mp3(files["mp3"], hours)
    report: dict[str, Any] = {
        "files": {name: path.stat().st_size for name, path in files.items()},
        "rows": [],
    }
    async with open_service(Settings(data_dir=root / "data")) as service:
        uris = {
            name: (await service.create_artifact(CALLER, _chunks(path), name=path.name)).uri
            for name, path in files.items()
        }
        async with Client(server(service)) as client:

            async def call(tool: str, argument: str, uri: str, facts: bool | None = None) -> None:
                arguments: dict[str, Any] = {argument: uri}
                if facts is not None:
                    arguments["facts"] = facts
                result = await client.call_tool(tool, arguments)
                assert not result.is_error, result.content

            # One call of each tool first: the first call of a server pays for imports the others do not.
            await call("plain", "file", uris["image"])
            await call("image", "image", uris["image"], False)
            await call("audio", "audio", uris["wav"], False)
            for name, tool, argument in (
                ("image", "image", "image"),
                ("wav", "audio", "audio"),
                ("mp3", "audio", "audio"),
            ):
                uri = uris[name]
                cases: list[tuple[str, Callable[[], Awaitable[None]], bool]] = [
                    ("FileInput", partial(call, "plain", "file", uri), False),
                    (f"{tool} (format sniffed)", partial(call, tool, argument, uri, False), False),
                    (f"{tool}, facts read: first", partial(call, tool, argument, uri, True), True),
                    (f"{tool}, facts read: cached", partial(call, tool, argument, uri, True), False),
                ]
                for label, run, cold in cases:
                    times: list[float] = []
                    for _ in range(runs):
                        if cold:
                            await forget_views(service)
                        times.append(await timed(run))
                    if cold:
                        await forget_views(service)
                    report["rows"].append(
                        {
                            "file": name,
                            "case": label,
                            "ms": round(statistics.median(times) * 1000, 1),
                            "python_peak_kib": round(await allocated(run) / 1024, 1),
                        }
                    )
    report["worker_peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)
    return report


def markdown(report: dict[str, Any]) -> str:
    sizes = ", ".join(f"{name} {size / MiB:.1f} MiB" for name, size in report["files"].items())
    lines = [
        f"Files: {sizes}. Decoder workers' peak RSS: {report['worker_peak_rss_mib']} MiB.",
        "",
        "| file | argument | call (median) | Python memory held during the call (peak) |",
        "| --- | --- | ---: | ---: |",
    ]
    for row in report["rows"]:
        lines.append(f"| {row['file']} | {row['case']} | {row['ms']} ms | {row['python_peak_kib']} KiB |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--image-mib", type=float, default=20.0, help="size of the PNG (default 20)")
    parser.add_argument("--hours", type=float, default=1.0, help="length of the recordings (default 1)")
    parser.add_argument("--runs", type=int, default=5, help="calls per case, medians taken (default 5)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON instead of a table")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="media-args-", dir=os.environ.get("TMPDIR")) as root:
        report = anyio.run(bench, Path(root), args.image_mib, args.hours, args.runs)
    print(json.dumps(report, indent=2) if args.json else markdown(report))


if __name__ == "__main__":
    main()

"""What the host receives from a tool call, direct vs through the offloading proxy: bytes and tokens.

Generates five upstream results (a 1920x1080 screenshot PNG, a 4000x3000 photo JPEG, a 5 MB PDF as an
embedded ``resource`` blob, 30 s of 44.1 kHz stereo WAV, a 2 MB text result), runs each through
:class:`mcp_resources.proxy.offload.Offloader` over a fresh local store (disk + SQLite in a temporary
directory) for every host profile, and reports the result's compact-JSON bytes and estimated tokens
(:func:`mcp_resources.proxy.offload.measure`: images by pixels, everything else bytes/4) before and after,
plus the wall time of the offload (storing, downscaling). Usage::

    .venv/bin/python bench/proxy_offload.py [--output bench/results/proxy_offload.md]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import math
import platform
import random
import struct
import sys
import tempfile
import time
import wave
from pathlib import Path
from typing import Any

from mcp.server import Server
from PIL import Image, ImageDraw

from blobstore.audit import AuditLog
from blobstore.config import Settings
from blobstore.models import Caller
from blobstore.runtime import open_service
from mcp_resources.embed import embed_store
from mcp_resources.proxy.offload import Offloader, measure
from mcp_resources.proxy.rules import HOST_PROFILES, load_rules

CALLER = Caller(namespace="bench")


def screenshot() -> bytes:
    """A UI-like 1920x1080 PNG: flat panels, a sidebar, and rows of glyph-like marks."""
    rng = random.Random(1)
    image = Image.new("RGB", (1920, 1080), (246, 247, 249))
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, 0, 1920, 56), fill=(32, 41, 56))
    draw.rectangle((0, 56, 280, 1080), fill=(232, 235, 240))
    for row in range(60, 1060, 22):
        x = 300 + rng.randrange(40)
        while x < 1880:
            width = rng.randrange(4, 60)
            shade = rng.randrange(20, 90)
            draw.rectangle((x, row, x + width, row + 12), fill=(shade, shade, shade + 10))
            x += width + rng.randrange(4, 12)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def photo() -> bytes:
    """A photo-like 4000x3000 JPEG: smooth colour fields plus sensor-like noise, quality 90."""
    rng = random.Random(2)
    small = Image.new("RGB", (16, 12))
    small.putdata([(rng.randrange(256), rng.randrange(256), rng.randrange(256)) for _ in range(16 * 12)])
    base = small.resize((4000, 3000), Image.Resampling.BICUBIC)
    noise = Image.effect_noise((4000, 3000), 30).convert("RGB")
    out = io.BytesIO()
    Image.blend(base, noise, 0.2).save(out, format="JPEG", quality=90)
    return out.getvalue()


def pdf(size: int = 5 * 1000 * 1000) -> bytes:
    head = b"%PDF-1.7\n"
    return head + random.Random(3).randbytes(size - len(head))


def wav(seconds: int = 30, rate: int = 44_100) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as handle:
        handle.setnchannels(2)
        handle.setsampwidth(2)
        handle.setframerate(rate)
        frames = bytearray()
        for i in range(seconds * rate):
            sample = int(9000 * math.sin(2 * math.pi * 440 * i / rate))
            frames += struct.pack("<hh", sample, sample)
        handle.writeframes(bytes(frames))
    return out.getvalue()


def text(size: int = 2 * 1000 * 1000) -> str:
    rng = random.Random(4)
    lines: list[str] = []
    total = 0
    while total < size:
        stamp = f"2026-11-30T12:{rng.randrange(60):02d}:{rng.randrange(60):02d}Z"
        line = f"{stamp} INFO request id={rng.getrandbits(64):016x} path=/api/items/{rng.randrange(10**6)}"
        line += f" status=200 ms={rng.randrange(900)}\n"
        lines.append(line)
        total += len(line)
    return "".join(lines)[:size]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def cases() -> list[tuple[str, dict[str, Any], int]]:
    shot, big_photo, document, audio, body = screenshot(), photo(), pdf(), wav(), text()
    return [
        (
            "1920x1080 screenshot (PNG)",
            {"content": [{"type": "image", "data": b64(shot), "mimeType": "image/png"}]},
            len(shot),
        ),
        (
            "4000x3000 photo (JPEG)",
            {"content": [{"type": "image", "data": b64(big_photo), "mimeType": "image/jpeg"}]},
            len(big_photo),
        ),
        (
            "5 MB PDF, embedded blob",
            {
                "content": [
                    {
                        "type": "resource",
                        "resource": {
                            "uri": "file:///r/report.pdf",
                            "mimeType": "application/pdf",
                            "blob": b64(document),
                        },
                    }
                ]
            },
            len(document),
        ),
        (
            "30 s WAV (44.1 kHz stereo)",
            {"content": [{"type": "audio", "data": b64(audio), "mimeType": "audio/wav"}]},
            len(audio),
        ),
        ("2 MB text", {"content": [{"type": "text", "text": body}]}, len(body.encode())),
    ]


def shape(result: dict[str, Any]) -> str:
    parts = []
    for block in result["content"]:
        kind = block["type"]
        if kind == "image":
            meta = (block.get("_meta") or {}).get("dev.blobstore/artifact") or {}
            size = f" {meta['width']}x{meta['height']}" if meta.get("width") else ""
            parts.append(f"image{size} {block['mimeType'].split('/')[1]}")
        elif kind == "text":
            parts.append(f"text {len(block['text'].encode())} B")
        else:
            parts.append(kind)
    return " + ".join(parts)


async def run() -> str:
    # "generic" has the same caps as "claude-code".
    profiles = ["claude-desktop", "claude-code"]
    rows: list[str] = []
    inputs = cases()
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=Path(tmp) / "data", audit_log=Path(tmp) / "audit.log")
        async with open_service(settings) as service:
            store = embed_store(Server("bench"), service, caller=CALLER, notifications=False)
            for name, result, raw_size in inputs:
                direct_bytes, direct_tokens = measure(result)
                for profile in profiles:
                    rules = load_rules(settings, profile=profile, config_path=None, read_tool_hint=True)
                    offloader = Offloader(
                        rules=rules,
                        store=store,
                        caller=CALLER,
                        upstream_name="bench",
                        read_tool_name="read_artifact",
                        audit=AuditLog(Path(tmp) / "audit.log"),
                    )
                    started = time.perf_counter()
                    out = await offloader.tool_result(
                        tool=f"bench-{profile}", arguments={"case": name}, output_schema=None, result=result
                    )
                    elapsed = (time.perf_counter() - started) * 1000
                    final = out if out is not None else result
                    size, tokens = measure(final)
                    caps = HOST_PROFILES[profile]
                    over = direct_bytes > caps.max_result_bytes or direct_tokens > caps.max_result_tokens
                    verdict = "over" if over else "fits"
                    rows.append(
                        f"| {name} | {raw_size:,} | {profile} | {direct_bytes:,} | {direct_tokens:,} "
                        f"| {verdict} | {size:,} | {tokens:,} | {shape(final)} | {elapsed:.0f} |"
                    )
    header = [
        f"Offloading proxy: what the host receives, direct vs proxied ({platform.machine()}, "
        f"Python {platform.python_version()}, {time.strftime('%Y-%m-%d', time.gmtime())})",
        "",
        "| upstream result | payload bytes | host profile | direct bytes | direct tokens | direct vs caps "
        "| proxied bytes | proxied tokens | the model gets | offload ms |",
        "| --- | ---: | --- | ---: | ---: | --- | ---: | ---: | --- | ---: |",
    ]
    return "\n".join(header + rows) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--output", type=Path, default=Path(__file__).parent / "results" / "proxy_offload.md")
    args = parser.parse_args()
    report = asyncio.run(run())
    sys.stdout.write(report)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(report)


if __name__ == "__main__":
    main()

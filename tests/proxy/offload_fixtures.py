"""Shared pieces of the offload tests: a real store (local disk + SQLite), real images, WAV audio and PDFs."""

from __future__ import annotations

import base64
import io
import json
import math
import random
import struct
import wave
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp.server import Server
from PIL import Image

from blobstore.audit import AuditLog
from blobstore.config import Settings
from blobstore.models import Caller
from blobstore.runtime import open_service
from blobstore.service import ArtifactService
from mcp_resources.embed import EmbeddedStore, embed_store
from mcp_resources.proxy.offload import Offloader
from mcp_resources.proxy.rules import OffloadRules, load_rules

CALLER = Caller(namespace="proxy-tests")
UPSTREAM = "test-upstream"
READ_TOOL = "read_artifact"


def photo_png(width: int, height: int, *, seed: int = 1) -> bytes:
    """A photo-like PNG: smooth gradients plus sensor-like noise, so it compresses like a photograph."""
    rng = random.Random(seed)
    small = Image.new("RGB", (16, 12))
    small.putdata([(rng.randrange(256), rng.randrange(256), rng.randrange(256)) for _ in range(16 * 12)])
    base = small.resize((width, height), Image.Resampling.BICUBIC)
    noise = Image.effect_noise((width, height), 24).convert("RGB")
    image = Image.blend(base, noise, 0.25)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def flat_png(width: int, height: int, color: tuple[int, int, int] = (40, 120, 200)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, format="PNG")
    return out.getvalue()


def wav_bytes(seconds: float, *, rate: int = 16_000, channels: int = 1) -> bytes:
    """A 440 Hz tone as 16-bit PCM WAV, made with the stdlib ``wave`` module."""
    frames = int(seconds * rate)
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(channels)
        wav.setsampwidth(2)
        wav.setframerate(rate)
        samples = (int(8000 * math.sin(2 * math.pi * 440 * i / rate)) for i in range(frames))
        wav.writeframes(b"".join(struct.pack("<h", s) * channels for s in samples))
    return out.getvalue()


def fake_pdf(size: int, *, seed: int = 7) -> bytes:
    head = b"%PDF-1.7\n"
    return head + random.Random(seed).randbytes(size - len(head))


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def image_block(data: bytes, mime: str = "image/png") -> dict[str, Any]:
    return {"type": "image", "data": b64(data), "mimeType": mime}


def text_of(result: dict[str, Any]) -> str:
    return "\n".join(b["text"] for b in result["content"] if b.get("type") == "text")


def links(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for b in result["content"] if b.get("type") == "resource_link"]


@dataclass
class Rig:
    service: ArtifactService
    store: EmbeddedStore
    settings: Settings
    audit_path: Path

    def offloader(
        self,
        *,
        profile: str = "generic",
        config: Path | None = None,
        read_tool_name: str | None = READ_TOOL,
        read_tool_hint: bool = True,
        rules: OffloadRules | None = None,
    ) -> Offloader:
        chosen = rules or load_rules(
            self.settings, profile=profile, config_path=config, read_tool_hint=read_tool_hint
        )
        return Offloader(
            rules=chosen,
            store=self.store,
            caller=CALLER,
            upstream_name=UPSTREAM,
            read_tool_name=read_tool_name,
            audit=AuditLog(self.audit_path),
        )

    async def bytes_of(self, uri: str) -> bytes:
        artifact_id = uri.rsplit("/", 1)[-1]
        artifact, data = await self.service.read_all(CALLER, artifact_id, limit=1 << 40)
        assert artifact.size == len(data)
        return data

    def audit_lines(self) -> list[dict[str, Any]]:
        if not self.audit_path.exists():
            return []
        return [json.loads(line) for line in self.audit_path.read_text().splitlines()]


@asynccontextmanager
async def open_rig(tmp_path: Path, **settings: Any) -> AsyncIterator[Rig]:
    """A real store: files on local disk and SQLite metadata under ``tmp_path``."""
    config = Settings(data_dir=tmp_path / "data", **settings)
    async with open_service(config) as service:
        store = embed_store(Server("proxy-under-test"), service, caller=CALLER, notifications=False)
        yield Rig(service=service, store=store, settings=config, audit_path=tmp_path / "audit.log")

"""A store of media made by real tools (tests/views/media.py), and clients of it on every transport."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from blobstore.config import Settings
from blobstore.models import Caller
from blobstore.runtime import open_service
from mcp_resources.transports.server import create_server, fixed_caller
from tests.fixtures.server import BLOBSTORE, start_server, stop_server
from tests.mcp.conftest import CALLER, NAMESPACE, put
from tests.views import media

PDF_PAGES = 12
LIBTASN1_PDF = Path("/usr/share/doc/libtasn1-doc/libtasn1.pdf")
"""A real 36-page manual (Debian's libtasn1-doc, installed by .ci/run) whose words TeX broke at line ends."""
PRINTED_LINES = ["Where text can say it, give text", "not pixels: 1,500 tokens against 100"]
"""The lines of printed.png (DejaVu Sans, 28 px): what OCR must read on it."""
SPEECH_SOUNDS = ["Front_Center", "Front_Left"]
SPEECH_GAP = 10.0
"""speech.wav: two ALSA voices with 10 s of silence between them (:func:`media.spoken_wav`)."""
TRANSPORTS = ["memory", "memory-legacy", "http", "http-legacy", "stdio", "stdio-legacy"]


@dataclass
class MediaSet:
    settings: Settings
    ids: dict[str, str] = field(default_factory=dict)
    """Artifact ids by name: report.pdf, scan.pdf, libtasn1.pdf, pattern.wav, tone.<kind>, clip.mp4,
    short.mp4 (two keyframes), scenes.mp4 (cuts at :data:`media.SCENE_CUTS`), picture.png, printed.png
    (:data:`PRINTED_LINES`), speech.wav (:data:`SPEECH_SOUNDS`)."""
    foreign_pdf: str = ""


async def _populate(settings: Settings, tmp: Path) -> MediaSet:
    found = MediaSet(settings)
    files: dict[str, bytes] = {
        "report.pdf": media.text_pdf(PDF_PAGES),
        "scan.pdf": media.image_pdf(2),
        "libtasn1.pdf": await anyio.Path(LIBTASN1_PDF).read_bytes(),
        "pattern.wav": media.pattern_wav(70.0),
        "clip.mp4": media.numbered_video(6),
        "short.mp4": media.numbered_video(2),
        "scenes.mp4": media.scenes_video(),
        "picture.png": media.png_bytes(600, 400),
        "printed.png": media.printed_text(PRINTED_LINES)[0],
        "speech.wav": media.spoken_wav(SPEECH_SOUNDS, SPEECH_GAP),
    }
    for kind in media.AUDIO_FORMATS:
        files[f"tone.{kind}"] = media.tone(kind, 45.0)
    async with open_service(settings) as service:
        for name, data in files.items():
            found.ids[name] = (await put(service, data, name)).id
        other = Caller(namespace="other")
        found.foreign_pdf = (await put(service, files["report.pdf"], "theirs.pdf", caller=other)).id
    return found


@pytest.fixture(scope="session")
def media_set(tmp_path_factory: pytest.TempPathFactory) -> MediaSet:
    settings = Settings(data_dir=tmp_path_factory.mktemp("views-data"))
    return anyio.run(_populate, settings, tmp_path_factory.mktemp("views-media"))


@pytest.fixture(scope="session")
def views_http(media_set: MediaSet, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``blobstore serve`` over the media set."""
    server = start_server(tmp_path_factory.mktemp("views-http"), data_dir=media_set.settings.data_dir)
    try:
        yield server.url
    finally:
        stop_server(server)


@contextlib.asynccontextmanager
async def connect(
    transport: str, media_set: MediaSet, request: pytest.FixtureRequest
) -> AsyncIterator[Client]:
    """An official-SDK client to the store over ``transport``."""
    mode: Any = "legacy" if transport.endswith("legacy") else "auto"
    if transport.startswith("memory"):
        async with open_service(media_set.settings) as service:
            server = create_server(service, caller_for=fixed_caller(CALLER))
            async with Client(server, mode=mode) as client:
                yield client
    elif transport.startswith("http"):
        base = request.getfixturevalue("views_http")
        async with Client(f"{base}/mcp", mode=mode) as client:
            yield client
    elif transport.startswith("stdio"):
        params = StdioServerParameters(
            command=BLOBSTORE,
            args=["mcp", "--data-dir", str(media_set.settings.data_dir), "--namespace", NAMESPACE],
        )
        async with Client(params, mode=mode) as client:
            yield client
    else:
        raise AssertionError(transport)

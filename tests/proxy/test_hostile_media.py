"""Hostile media in tool results, from a real upstream process behind ``blobstore proxy``.

None crashes or stalls the proxy and none is decoded past the pixel budget; each is stored or passed on as
docs/proxy.md ("Hostile media") says.
"""

from __future__ import annotations

import base64
import io
import json
import struct
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final

import pytest
from PIL import Image

from tests.fixtures.png_chunks import png_chunk, rebuilt
from tests.proxy.conftest import RAW_UPSTREAM, RawPeer, proxy_command, raw_peer, vm_hwm
from tests.proxy.offload_fixtures import flat_png, photo_png

MiB: Final = 1024 * 1024


def png_bomb(edge: int = 30_000) -> bytes:
    """A one-colour 1-bit PNG of ``edge`` x ``edge`` pixels, made row by row: about 100 KB on disk,
    900 megapixels decoded."""
    squeeze = zlib.compressobj(9)
    row = b"\x00" + b"\x00" * ((edge + 7) // 8)
    packed = b"".join(squeeze.compress(row) for _ in range(edge)) + squeeze.flush()
    header = struct.pack(">IIBBBBB", edge, edge, 1, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + png_chunk(b"IHDR", header)
        + png_chunk(b"IDAT", packed)
        + png_chunk(b"IEND", b"")
    )


def animated_gif() -> bytes:
    frames = [Image.new("P", (64, 64), colour) for colour in (1, 2, 3)]
    out = io.BytesIO()
    frames[0].save(out, format="GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)
    return out.getvalue()


SVG: Final = (
    b'<svg xmlns="http://www.w3.org/2000/svg" width="40000" height="40000">'
    b'<rect width="40000" height="40000" fill="red"/></svg>'
)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.fixture
async def peer(data_dir: Path) -> AsyncIterator[RawPeer]:
    async with raw_peer(proxy_command(data_dir, RAW_UPSTREAM)) as opened:
        await opened.handshake()
        yield opened
        assert await opened.close() == 0


async def media(peer: RawPeer, data: str, mime: str) -> dict[str, Any]:
    params = {"name": "media", "arguments": {"data": data, "mime": mime}}
    answer: dict[str, Any] = json.loads(await peer.request(1, "tools/call", params))
    assert "result" in answer, answer
    result: dict[str, Any] = answer["result"]
    return result


def kinds(result: dict[str, Any]) -> list[str]:
    return [block["type"] for block in result["content"]]


def line(result: dict[str, Any]) -> str:
    return str(result["content"][0].get("text", ""))


async def test_a_decompression_bomb_is_stored_and_linked_without_being_decoded(peer: RawPeer) -> None:
    bomb = png_bomb()
    assert len(bomb) < 256 * 1024
    result = await media(peer, b64(bomb), "image/png")
    assert kinds(result) == ["text", "resource_link"]
    assert "is not shown inline (it is not decoded: it has 900000000 pixels, over the 80000000" in line(
        result
    )
    assert "inline limit" not in line(result)
    assert vm_hwm(peer.process.pid) < 400 * MiB  # decoding it would take 900 MB at one byte a pixel


async def test_a_truncated_png_is_stored_and_linked(peer: RawPeer) -> None:
    whole = photo_png(1600, 1200)
    result = await media(peer, b64(whole[: len(whole) // 2]), "image/png")
    assert kinds(result) == ["text", "resource_link"]
    assert "is not shown inline (it could not be decoded: its image data is truncated" in line(result)


async def test_a_png_whose_critical_chunk_fails_its_crc_is_linked_saying_so(peer: RawPeer) -> None:
    broken = rebuilt(photo_png(1600, 1200), corrupt=b"IDAT")
    result = await media(peer, b64(broken), "image/png")
    assert kinds(result) == ["text", "resource_link"]
    assert "is not shown inline (it could not be decoded: the PNG's critical IDAT chunk" in line(result)
    assert "fails its CRC check" in line(result)


async def test_a_png_whose_ancillary_chunk_fails_its_crc_is_shown_without_it(peer: RawPeer) -> None:
    photo = photo_png(1600, 1200)
    damaged = photo[:33] + png_chunk(b"tEXt", b"Comment\x00a damaged note", crc_ok=False) + photo[33:]
    result = await media(peer, b64(damaged), "image/png")
    assert kinds(result) == ["text", "image", "resource_link"]
    shown = Image.open(io.BytesIO(base64.b64decode(result["content"][1]["data"])))
    assert shown.size == (1024, 768)


async def test_an_svg_is_stored_and_linked_never_rendered(peer: RawPeer) -> None:
    result = await media(peer, b64(SVG), "image/svg+xml")
    assert kinds(result) == ["text", "resource_link"]
    # Its bytes are text (no image signature), and it is stored as what they are.
    assert "is not shown inline (text/plain is not an image type hosts show inline)" in line(result)


async def test_a_small_animated_gif_passes_as_it_came(peer: RawPeer) -> None:
    data = b64(animated_gif())
    result = await media(peer, data, "image/gif")
    assert result["content"] == [{"type": "image", "data": data, "mimeType": "image/gif"}]


async def test_an_empty_image_is_passed_on_as_it_came(peer: RawPeer) -> None:
    result = await media(peer, "", "image/png")
    assert result["content"] == [{"type": "image", "data": "", "mimeType": "image/png"}]


async def test_an_image_whose_mime_type_lies_is_shown_under_its_real_type(peer: RawPeer) -> None:
    result = await media(peer, b64(flat_png(2400, 1800)), "image/jpeg")
    assert kinds(result) == ["text", "image", "resource_link"]
    assert result["content"][1]["mimeType"] == "image/png"
    assert result["content"][2]["mimeType"] == "image/png"


async def test_data_that_is_not_base64_is_passed_on_as_it_came(peer: RawPeer) -> None:
    result = await media(peer, "this is not base64!", "image/png")
    assert result["content"] == [{"type": "image", "data": "this is not base64!", "mimeType": "image/png"}]

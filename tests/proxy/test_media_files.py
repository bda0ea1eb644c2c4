"""server-filesystem's ``read_media_file`` behind the proxy: what the host sees of a chart, and the names the
stored originals get.

``read_media_file`` mirrors its image block in ``structuredContent`` (``{"content": [{"type": "image",
"data": ..., "mimeType": ...}]}``); the mirror must not cost the image its budget.
"""

from __future__ import annotations

import base64
import io
import math
import random
from pathlib import Path
from typing import Any, Final

import pytest
from PIL import Image, ImageDraw, ImageFont

from mcp_resources.proxy.measure import measure
from tests.proxy.conftest import call, filesystem_upstream, link_of, proxy_command, raw_peer, stored

pytestmark = pytest.mark.usefixtures("npm_servers")

CHART_EDGE: Final = 2100


def chart_png(*, seed: int, title: str) -> bytes:
    """A 2100x2100 line chart with a title and axis labels: its 1024 px PNG is a few hundred KB (antialiased
    lines and text), so its base64 mirrored as text would cost far more than the image does."""
    rng = random.Random(seed)
    size = CHART_EDGE
    image = Image.new("RGB", (size, size), "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=36)
    margin = 180
    for i in range(11):
        y = margin + i * (size - 2 * margin) // 10
        draw.line([(margin, y), (size - margin, y)], fill=(210, 210, 210), width=2)
        draw.text((20, y - 18), f"{100 - 10 * i} %", fill="black", font=font)
        x = margin + i * (size - 2 * margin) // 10
        draw.text((x - 30, size - margin + 20), f"Q{i + 1}", fill="black", font=font)
    for series, colour in enumerate([(200, 40, 40), (40, 90, 200), (30, 160, 80)]):
        points = [
            (
                margin + k * (size - 2 * margin) / 400,
                size / 2 + 500 * math.sin(k / 40 + series) + rng.gauss(0, 60),
            )
            for k in range(401)
        ]
        draw.line(points, fill=colour, width=4)
        for px, py in points[::3]:
            draw.ellipse([px - 6, py - 6, px + 6, py + 6], fill=colour)
    draw.text((size // 2 - 300, 40), title, fill="black", font=ImageFont.load_default(size=56))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


@pytest.fixture(scope="module")
def charts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("charts")
    (root / "revenue.png").write_bytes(chart_png(seed=5, title="Revenue by quarter, three regions"))
    (root / "costs.png").write_bytes(chart_png(seed=6, title="Costs by quarter, three regions"))
    return root


def shown_image(result: dict[str, Any]) -> tuple[int, int]:
    (image,) = [block for block in result["content"] if block["type"] == "image"]
    with Image.open(io.BytesIO(base64.b64decode(image["data"]))) as decoded:
        return decoded.size


async def test_a_2100_px_chart_reaches_claude_code_at_1024_px_with_its_mirror_as_a_reference(
    charts: Path, data_dir: Path
) -> None:
    command = proxy_command(data_dir, filesystem_upstream(charts), "--host-profile", "claude-code")
    async with raw_peer(command) as peer:
        await peer.handshake()
        answer = await call(peer, 1, "read_media_file", {"path": str(charts / "revenue.png")})
        assert await peer.close() == 0
    result = answer["result"]
    assert shown_image(result) == (1024, 1024)
    link = link_of(answer)
    # The mirror names the stored original (a string, as the tool's outputSchema asks) instead of
    # repeating the image's bytes.
    assert result["structuredContent"] == {
        "content": [{"type": "image", "data": link["uri"], "mimeType": "image/png"}]
    }
    size, tokens = measure(result)
    assert size <= 1_048_576
    assert tokens <= 25_000
    (artifact,) = await stored(data_dir)
    assert artifact.size == (charts / "revenue.png").stat().st_size


async def test_two_media_files_are_stored_under_their_own_names(charts: Path, data_dir: Path) -> None:
    command = proxy_command(data_dir, filesystem_upstream(charts), "--host-profile", "claude-desktop")
    async with raw_peer(command) as peer:
        await peer.handshake()
        revenue = link_of(await call(peer, 1, "read_media_file", {"path": str(charts / "revenue.png")}))
        costs = link_of(await call(peer, 2, "read_media_file", {"path": str(charts / "costs.png")}))
        again = link_of(await call(peer, 3, "read_media_file", {"path": str(charts / "revenue.png")}))
        assert await peer.close() == 0
    assert (revenue["name"], costs["name"]) == ("revenue.png", "costs.png")
    # The same call again is the same artifact, as before (its name is stable).
    assert again["uri"] == revenue["uri"]
    assert sorted(artifact.name for artifact in await stored(data_dir)) == ["costs.png", "revenue.png"]

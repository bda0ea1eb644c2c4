"""The names offloaded payloads are stored under: the upstream's file name where there is one, else the tool,
a short id of the call's arguments and the block's place; never anything of the payload's bytes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcp_resources.proxy.names import file_name_of, payload_name
from mcp_resources.proxy.offload import canonical_digest
from tests.proxy.offload_fixtures import Rig, b64, flat_png, image_block, links, wav_bytes

LONG_TEXT = "a line of a long log\n" * 5000


async def name_of(
    rig: Rig, tool: str, arguments: dict[str, Any], block: dict[str, Any], *, at: int = 0
) -> str:
    content: list[dict[str, Any]] = [{"type": "text", "text": "before"}] * at + [block]
    out = await rig.offloader().tool_result(
        tool=tool, arguments=arguments, output_schema=None, result={"content": content}
    )
    assert out is not None
    (link,) = links(out)
    name: str = link["name"]
    return name


async def test_a_path_argument_names_the_payload_of_its_type(rig: Rig) -> None:
    image = image_block(flat_png(2000, 1000))
    assert (
        await name_of(rig, "read_media_file", {"path": "/charts/q3 revenue.png"}, image) == "q3 revenue.png"
    )
    audio = {"type": "audio", "data": b64(wav_bytes(20)), "mimeType": "audio/wav"}
    assert await name_of(rig, "read_media_file", {"path": "C:\\rec\\meeting.wav"}, audio) == "meeting.wav"
    text = {"type": "text", "text": LONG_TEXT}
    assert await name_of(rig, "read_text_file", {"path": "/var/log/app.log"}, text) == "app.log"
    assert await name_of(rig, "fetch", {"url": "https://example.org/a/b/notes.md?x=1#y"}, text) == "notes.md"


async def test_a_payload_of_another_type_than_the_named_file_takes_its_stem_and_place(rig: Rig) -> None:
    page = image_block(flat_png(2000, 1000))
    assert await name_of(rig, "render_page", {"file_path": "/docs/report.pdf"}, page, at=2) == "report-2.png"


async def test_without_a_file_name_the_tool_a_short_id_of_the_arguments_and_the_place(rig: Rig) -> None:
    image = image_block(flat_png(2000, 1000))
    first = await name_of(rig, "screenshot", {"page": 1}, image, at=1)
    second = await name_of(rig, "screenshot", {"page": 2}, image, at=1)
    assert first == f"screenshot-{canonical_digest({'page': 1})[:8]}-1.png"
    assert second == f"screenshot-{canonical_digest({'page': 2})[:8]}-1.png"
    assert first != second
    # Stable: the same call names it the same way (and reuses the artifact, as the TTL test shows).
    assert await name_of(rig, "screenshot", {"page": 1}, image, at=1) == first
    # A directory, a bare word, a hidden file: no file name.
    for arguments in ({"path": "/charts/"}, {"path": "charts"}, {"path": "/home/me/.bashrc"}):
        assert file_name_of(arguments) is None


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"path": "/a/b.png"}, "b.png"),
        ({"filePath": "b.png"}, "b.png"),
        ({"file-name": "b.png"}, "b.png"),
        ({"uri": "file:///srv/pics/a%20b.jpg"}, "a b.jpg"),
        ({"query": "/a/b.png"}, None),
        ({"path": 7}, None),
        (None, None),
    ],
)
def test_which_arguments_name_a_file(arguments: dict[str, Any] | None, expected: str | None) -> None:
    assert file_name_of(arguments) == expected


def test_the_documented_names_are_the_codes() -> None:
    docs = Path(__file__).resolve().parents[2] / "docs"
    text = " ".join((docs / "proxy-offload-rules.md").read_text(encoding="utf-8").split())
    name = payload_name(
        tool="take_screenshot",
        arguments_sha256=canonical_digest({}),
        file_name=None,
        index=0,
        mime="image/png",
    )
    assert f"`{name}` for a call without arguments" in text
    assert f"(`{name}`)" in " ".join((docs / "proxy.md").read_text(encoding="utf-8").split())
    report = payload_name(
        tool="render_page",
        arguments_sha256=canonical_digest({"file_path": "report.pdf"}),
        file_name=file_name_of({"file_path": "report.pdf"}),
        index=2,
        mime="image/png",
    )
    assert f'(`{report}`, an image from `render_page(file_path="report.pdf")`)' in text

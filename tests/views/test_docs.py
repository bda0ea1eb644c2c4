"""The examples of ``docs/views.md``, run as written: the ``read_artifact`` calls through the official
client (their answers' first and last lines as the doc shows them) and the curl commands against
``blobstore serve``."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
from pathlib import Path

import pytest
from mcp.types import TextContent

from tests.views.conftest import MediaSet, connect

DOC = Path(__file__).resolve().parents[2] / "docs" / "views.md"
_BLOCK = re.compile(r"```(json|text|sh)\n(.*?)```", re.DOTALL)
_NAMES = {
    "pages": "report.pdf",
    "start_seconds": "pattern.wav",
    "frames": "clip.mp4",
    "region": "picture.png",
}


def _examples() -> list[tuple[dict[str, object], str, str]]:
    """Each documented call with the first and last lines the doc shows for its answer."""
    blocks = _BLOCK.findall(DOC.read_text(encoding="utf-8"))
    found = []
    for (kind, body), (next_kind, answer) in itertools.pairwise(blocks):
        if kind == "json" and '"read_artifact"' in body and next_kind == "text":
            lines = answer.strip().splitlines()
            found.append((json.loads(body), lines[0], lines[-1]))
    return found


def test_the_doc_shows_a_call_of_every_kind_of_view() -> None:
    kinds = {next(k for k in _NAMES if k in call["arguments"]) for call, _, _ in _examples()}  # type: ignore[operator]
    assert kinds == set(_NAMES)


async def test_the_documented_calls_answer_as_the_doc_shows(
    media_set: MediaSet, request: pytest.FixtureRequest
) -> None:
    async with connect("memory", media_set, request) as client:
        for call, first, last in _examples():
            arguments = dict(call["arguments"])  # type: ignore[call-overload]
            name = next(_NAMES[k] for k in _NAMES if k in arguments)
            arguments["uri"] = f"blobstore://artifacts/{media_set.ids[name]}"
            result = await client.call_tool(str(call["name"]), arguments)
            assert not result.is_error, result.content
            texts = [block.text for block in result.content if isinstance(block, TextContent)]
            assert (texts[0], texts[-1]) == (first, last)


def test_the_documented_curl_commands_run(views_http: str, media_set: MediaSet, tmp_path: Path) -> None:
    (script,) = [body for kind, body in _BLOCK.findall(DOC.read_text(encoding="utf-8")) if kind == "sh"]
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "B": views_http,
        "PDF": media_set.ids["report.pdf"],
        "WAV": media_set.ids["pattern.wav"],
        "VIDEO": media_set.ids["clip.mp4"],
    }
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    out = done.stdout.decode()
    assert "MARKER-P007-END" in out
    assert '"time_seconds":1.0' in out.replace(" ", "")
    assert (tmp_path / "page7.png").read_bytes().startswith(b"\x89PNG")
    assert (tmp_path / "clip.wav").read_bytes()[8:12] == b"WAVE"
    assert (tmp_path / "frame0.jpg").read_bytes().startswith(b"\xff\xd8")

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

from tests.views.conftest import PRINTED_LINES, MediaSet, connect

DOC = Path(__file__).resolve().parents[2] / "docs" / "views.md"
_BLOCK = re.compile(r"```(json|text|sh)\n(.*?)```", re.DOTALL)
_NAMES = {
    "transcript": "speech.wav",
    "pages": "report.pdf",
    "start_seconds": "pattern.wav",
    "frames": "scenes.mp4",
    "ocr": "printed.png",
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
        "VIDEO": media_set.ids["scenes.mp4"],
        "IMAGE": media_set.ids["printed.png"],
        "SPEECH": media_set.ids["speech.wav"],
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
    compact = out.replace(" ", "")
    assert '"mode":"scenes","scenes":3,"scene_starts":[0.0,2.0,4.0]' in compact
    assert '"mode":"even","frames":[{"index":0,"time_seconds":0.0' in compact
    assert "\n".join(PRINTED_LINES) in out
    assert (tmp_path / "page7.png").read_bytes().startswith(b"\x89PNG")
    assert (tmp_path / "clip.wav").read_bytes()[8:12] == b"WAVE"
    assert (tmp_path / "frame0.jpg").read_bytes().startswith(b"\xff\xd8")
    ocr = json.loads((tmp_path / "ocr.json").read_text())
    assert [line["text"] for line in ocr["lines"]] == PRINTED_LINES[1:]
    page = json.loads((tmp_path / "page7-ocr.json").read_text())
    assert (page["page"], page["words_read"]) == (7, 1)
    # From 0:05 only the second voice ("Front Left") is heard; the JSON and the captions hold both.
    assert re.search(r"\[11\.\d\d-12\.\d\d\] [^\[\n]* left", out), out[-400:]
    (start,) = re.findall(r"\[(\d+\.\d\d)-\d+\.\d\d\]", out)  # one segment line, after 0:05
    assert float(start) > 5
    said = json.loads((tmp_path / "said.json").read_text())
    assert (said["language"], len(said["segments"])) == ("en-us", 2)
    assert (tmp_path / "said.vtt").read_text().startswith("WEBVTT\n\n00:00:00.")


def test_the_http_api_docs_ocr_and_scene_examples_run(
    views_http: str, media_set: MediaSet, tmp_path: Path
) -> None:
    from tests.e2e import docs_examples as doc

    script = doc.block("/ocr.txt")
    done = doc.run(
        script,
        tmp_path,
        B=views_http,
        A=media_set.ids["printed.png"],
        PDF=media_set.ids["report.pdf"],
        VIDEO=media_set.ids["scenes.mp4"],
    )
    out = done.stdout.decode()
    assert out.startswith("\n".join(PRINTED_LINES))
    assert "x-ocr-words: 6" in out.lower()
    assert (tmp_path / "line.txt").read_text() == PRINTED_LINES[1]
    words = json.loads((tmp_path / "words.json").read_text())
    assert [line["text"] for line in words["lines"]] == PRINTED_LINES
    assert all(0 <= word["confidence"] <= 1 for line in words["lines"] for word in line["words"])
    page = json.loads((tmp_path / "page3.json").read_text())
    assert [line["text"] for line in page["lines"]] == ["MARKER-P003-END"]
    assert '"scene_starts":[0.0,2.0,4.0]' in out.replace(" ", "")

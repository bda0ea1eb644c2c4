"""The share example of docs/console.md, run as written with curl against a real ``blobstore serve``: the
link downloads without a token, and once expired the status line says 403."""

from __future__ import annotations

import html
import re
import subprocess
import time
from pathlib import Path

import httpx

from tests.fixtures.server import serving

DOC = Path(__file__).resolve().parents[2] / "docs" / "console.md"
BLOCKS = re.compile(r"```sh\n(.*?)```", re.DOTALL)
CSRF = re.compile(r'<meta name="csrf-token" content="([0-9a-f]+)">')
SHARE = re.compile(r'id="share-link" class="copyable" readonly value="([^"]+)"')


def share_block() -> str:
    found: list[str] = [text for text in BLOCKS.findall(DOC.read_text(encoding="utf-8")) if '"$LINK"' in text]
    assert len(found) == 1
    return found[0]


def make_link(browser: httpx.Client, artifact_id: str, expires: str) -> str:
    page = browser.get(f"/console/artifacts/{artifact_id}")
    csrf = CSRF.search(page.text)
    assert csrf is not None
    answer = browser.post(
        f"/console/artifacts/{artifact_id}/share",
        data={"csrf": csrf.group(1), "expires": expires},
        follow_redirects=True,
    )
    found = SHARE.search(answer.text)
    assert found is not None, answer.text
    return html.unescape(found.group(1))


def run(block: str, cwd: Path, link: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block],
        cwd=cwd,
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", "LINK": link},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_share_example_downloads_and_then_says_403(tmp_path: Path) -> None:
    data = b"RIFF-like bytes of a recording"
    with serving(tmp_path) as server, httpx.Client(base_url=server.url) as browser:
        stored = browser.post("/v1/artifacts", params={"name": "tone.wav"}, content=data)  # local mode
        assert stored.status_code == 201
        artifact_id = stored.json()["id"]
        assert browser.post("/console/login", data={"local": "1"}).status_code == 303
        live = make_link(browser, artifact_id, "1h")
        short = make_link(browser, artifact_id, "1s")

        done = run(share_block(), tmp_path, live)
        assert done.returncode == 0, done.stderr
        assert (tmp_path / "tone.wav").read_bytes() == data
        assert done.stdout.strip() == "200"

        time.sleep(1.5)
        (tmp_path / "tone.wav").unlink()
        expired = run(share_block(), tmp_path, short)
        assert expired.returncode != 0  # curl -f refuses the 403
        assert not (tmp_path / "tone.wav").exists()
        assert run(share_block().splitlines()[1], tmp_path, short).stdout.strip() == "403"

"""The console in a real browser: headless Chromium, driven by playwright-core (``js/drive.mjs``), against a
real ``blobstore serve`` with two namespaces' tokens.

It logs in with a token, uploads three files by the file chooser in chunks (one of several chunks, held
mid-way, then the page reloaded and the files chosen again: the upload resumes with the chunks the server
lacks, through one more dropped connection), sees the dedup result and the list, opens an image (scaled, then
full size), a PDF and a WAV (the audio element plays over ``Range``: the server saw it), makes and copies a
share link and fetches it with no cookie, sees a short one refused once expired, runs a cleanup dry run,
deletes, checks that an SVG named ``<img src=x onerror=alert(1)>.svg`` holding a script runs nothing (no
dialog at all), and logs in as another namespace that sees none of it. Screenshots of every page at 1280x800
land in the test's temporary directory (``shots/``).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from tests.fixtures.browser import CHROMIUM, NODE, playwright_ready
from tests.fixtures.commands import run_cli
from tests.fixtures.server import Server, isolated_env, serving
from tests.views.media import marker, pattern_wav, text_pdf

JS_DIR = Path(__file__).parent / "js"
KiB = 1024
CHUNK = 256 * KiB
BIG_SIZE = 6 * CHUNK + 777  # seven chunks
HOLD_CHUNK = 3  # the third chunk PUT is held: two are on the server when the page reloads
SHORT_LINK_SECONDS = 2
DRIVER_DEADLINE_SECONDS = 240.0  # a watchdog against a hung browser, not a measurement
HOSTILE = "<img src=x onerror=alert(1)>.svg"
SVG = (
    b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(2)"><script>alert(3)</script>'
    b'<rect width="10" height="10"/></svg>'
)


@pytest.fixture(scope="module")
def driver_ready() -> Path:
    playwright_ready(JS_DIR)
    return JS_DIR / "drive.mjs"


def create_token(data_dir: Path, namespace: str, scopes: str) -> str:
    done = run_cli(
        ["token", "create", "--namespace", namespace, "--scopes", scopes, "--json"],
        isolated_env({"BLOBSTORE_DATA_DIR": str(data_dir)}),
    )
    assert done.returncode == 0, done.stderr
    token: str = json.loads(done.stdout)["token"]
    return token


def png(width: int, height: int) -> bytes:
    image = Image.new("RGB", (width, height))
    for x in range(0, width, 40):
        for y in range(0, height, 40):
            image.paste((x * 255 // width, y * 255 // height, 160), (x, y, x + 40, y + 40))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


@pytest.fixture
def console_server(tmp_path: Path) -> Iterator[tuple[Server, str, str]]:
    root = tmp_path / "server"
    root.mkdir()
    token_a = create_token(root / "data", "alpha", "read,write,admin")
    token_b = create_token(root / "data", "beta", "read,write")
    env = {"BLOBSTORE_DEFAULT_CHUNK_SIZE": str(CHUNK), "BLOBSTORE_MIN_CHUNK_SIZE": str(CHUNK)}
    with serving(root, env=env) as running:
        yield running, token_a, token_b


def put(server: Server, token: str, data: bytes, name: str, mime: str) -> str:
    answer = httpx.post(
        f"{server.url}/v1/artifacts",
        params={"name": name, "mime_type": mime},
        content=data,
        headers={"Authorization": f"Bearer {token}"},
    )
    assert answer.status_code == 201, answer.text
    artifact_id: str = answer.json()["id"]
    return artifact_id


def drive(script: Path, config: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run(
        [str(NODE), str(script), json.dumps(config)],
        capture_output=True,
        text=True,
        timeout=DRIVER_DEADLINE_SECONDS,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines, done.stderr
    seen: dict[str, Any] = json.loads(lines[-1])
    return seen


def test_the_console_in_a_real_browser(
    driver_ready: Path, console_server: tuple[Server, str, str], tmp_path: Path
) -> None:
    server, token_a, token_b = console_server
    files = tmp_path / "files"
    files.mkdir()
    big = os.urandom(BIG_SIZE)
    picture = png(1600, 1000)
    (files / "big.bin").write_bytes(big)
    (files / "picture.png").write_bytes(picture)
    (files / "notes.txt").write_bytes(b"three small lines\nof text\nfor the console\n")
    (files / "picture-copy.png").write_bytes(picture)
    image_id = put(server, token_a, png(1200, 800), "chart.png", "image/png")
    pdf_id = put(server, token_a, text_pdf(2), "report.pdf", "application/pdf")
    wav_id = put(server, token_a, pattern_wav(2.0), "tone.wav", "audio/wav")
    hostile_id = put(server, token_a, SVG, HOSTILE, "image/svg+xml")
    long_text = "".join(f"line {number:05} of a long log\n" for number in range(12_000))
    text_id = put(server, token_a, long_text.encode(), "run.log", "text/plain")
    album = files / "album"
    album.mkdir()
    (album / "one.txt").write_bytes(b"first file of a folder\n")
    (album / "two.txt").write_bytes(b"second file of a folder\n")
    shots = tmp_path / "shots"
    shots.mkdir()

    seen = drive(
        driver_ready,
        {
            "chromium": str(CHROMIUM),
            "server": server.url,
            "tokenA": token_a,
            "tokenB": token_b,
            "files": [str(files / name) for name in ("big.bin", "picture.png", "notes.txt")],
            "duplicate": str(files / "picture-copy.png"),
            "holdChunk": HOLD_CHUNK,
            "imageId": image_id,
            "pdfId": pdf_id,
            "wavId": wav_id,
            "hostileId": hostile_id,
            "textId": text_id,
            "folder": str(album),
            "shortLinkSeconds": SHORT_LINK_SECONDS,
            "shots": str(shots),
            "stepTimeoutMs": 30_000,
            "uploadTimeoutMs": 120_000,
        },
    )
    assert "failed" not in seen, (seen.get("failed"), seen["console"], seen["steps"])
    auth = {"Authorization": f"Bearer {token_a}"}

    # Held mid-file: two chunks of the large file on the server, its upload id kept in localStorage.
    before = seen["beforeReload"]
    [kept] = [
        json.loads(value) for key, value in before["storage"].items() if key.startswith("blobstore-upload:")
    ]
    assert kept["name"] == "big.bin"
    assert before["status"]["upload_id"] == kept["uploadId"]
    assert before["status"]["chunks_received"] == [0, 1]
    assert before["progress"] == [2 * CHUNK, BIG_SIZE]
    assert any("big.bin" in line for line in seen["pendingAfterReload"])
    assert seen["pendingWhenDone"] == []

    # After the reload: the same upload resumed (no second create for it), only the missing chunks sent.
    after = seen["afterReload"]
    assert after["dropped"] is True
    rows = {row["path"]: row for row in after["rows"]}
    assert {row["state"] for row in rows.values()} == {"done"}, rows
    assert rows["big.bin"]["resumed"] == "2"
    assert rows["big.bin"]["uploadId"] == kept["uploadId"]
    creates = [
        sent for sent in after["requests"] if sent["method"] == "POST" and sent["path"].endswith("/uploads")
    ]
    assert len(creates) == 2  # the picture and the notes; none for the large file
    big_puts = sorted(
        {
            int(sent["path"].rsplit("/", 1)[1])
            for sent in after["requests"]
            if kept["uploadId"] in sent["path"] and sent["method"] == "PUT"
        }
    )
    assert big_puts == [2, 3, 4, 5, 6]
    assert not [key for key in after["storage"] if key.startswith("blobstore-upload:")]
    for name, data in (("big.bin", big), ("picture.png", picture)):
        stored = httpx.get(f"{server.url}/v1/artifacts/{rows[name]['artifactId']}", headers=auth).json()
        assert stored["sha256"] == hashlib.sha256(data).hexdigest(), name
        assert stored["size"] == len(data)
    assert {row["dedup"] for row in rows.values()} == {"new"}
    assert seen["duplicate"]["dedup"] == "same content"
    # A new artifact over content the namespace held already: both named, and no new bytes.
    picture_id = rows["picture.png"]["artifactId"]
    assert seen["duplicateStatus"] == (
        f"stored as {seen['duplicate']['artifactId']}: same content as {picture_id}, no new bytes"
    )

    # A folder: its files under their paths in it.
    assert sorted(seen["folder"]) == ["album/one.txt", "album/two.txt"]

    # The list: newest first, with thumbnails that loaded.
    assert seen["listed"][2:4] == ["picture-copy.png", "notes.txt"]
    assert sorted(seen["listed"][:2]) == ["album/one.txt", "album/two.txt"]
    assert {"big.bin", "picture.png", "chart.png", "report.pdf", "tone.wav", "run.log", HOSTILE} <= set(
        seen["listed"]
    )
    assert seen["thumbnails"]
    assert all(seen["thumbnails"])

    # Previews: the image scaled down to 1024 pixels, then at full size; integrity verified on request.
    assert seen["image"] == {"scaled": 1024, "full": 1200}
    assert seen["verify"] == "1 block of 1 MiB, checked against its XXH3-128; SHA-256 matches"
    # Text: the head first, the rest by ranges on request, every character in place.
    assert seen["text"]["head"] < len(long_text)
    assert seen["text"]["whole"] == long_text

    # The PDF through the media views' routes: page images and their text, page by page.
    assert seen["pdf"]["kind"] == "pdf"
    assert seen["pdf"]["pages"] is True
    assert seen["pdf"]["width"] > 0
    assert [marker(1), marker(2)] == [text.strip() for text in seen["pdf"]["text"]]
    assert seen["audio"]["currentTime"] > 0
    assert seen["audio"]["ranges"], "the audio element asked for a range"
    log = server.log_text()
    wav_reads = [
        json.loads(line)
        for line in log.splitlines()
        if line.startswith("{") and f"/console/api/v1/artifacts/{wav_id}/content" in line
    ]
    assert any(entry.get("status") == 206 for entry in wav_reads), wav_reads

    # Share: the copied link is the one shown, it works without a cookie, and the short one expired.
    share = seen["share"]
    assert share["copied"] == share["link"]
    assert share["link"].startswith(f"{server.url}/share/alpha/{wav_id}?")
    assert share["status"] == 200
    assert share["size"] == len(pattern_wav(2.0))
    assert share["shortBefore"] == 200
    assert share["shortAfter"] in {403, 404}
    assert httpx.get(share["link"]).status_code == 200

    # The hostile name and the SVG's script ran nothing; the bytes were a download, never a page.
    assert seen["dialogs"] == []
    assert seen["hostileListed"] == [HOSTILE]
    assert seen["hostileName"] == HOSTILE
    assert "<script>alert(3)</script>" in seen["hostileSource"]
    # (Chromium swaps the name's < and > for _ in the file it saves.)
    assert seen["hostileDownload"] == HOSTILE.replace("<", "_").replace(">", "_")

    # Operate: usage of both namespaces' store, a dry run as a table, and the delete.
    assert any(row.startswith("alpha") for row in seen["usage"])
    assert seen["cleanup"]["summary"].startswith("Dry run: would free")
    assert seen["cleanupUrl"] == f"{server.url}/console/operate#cleanup"
    assert seen["cleanup"]["steps"] == ["expire", "uploads", "blobs", "orphans"]
    assert seen["duplicate"]["artifactId"] not in seen["afterDelete"]
    gone = httpx.get(f"{server.url}/v1/artifacts/{seen['duplicate']['artifactId']}", headers=auth)
    assert gone.status_code == 404

    # Another namespace's token sees none of it.
    assert seen["otherListed"] == []
    assert seen["otherEmpty"] is True
    assert seen["foreignStatus"] == 404

    for name in (
        "login",
        "upload-held",
        "upload-done",
        "artifacts",
        "image",
        "pdf",
        "audio",
        "share",
        "operate",
        "cleanup",
        "other-namespace",
    ):
        with Image.open(shots / f"{name}.png") as shot:
            assert shot.size == (1280, 800), name
    # The dropped connection and the foreign 404 are logged as failed loads; no script ever failed.
    assert not [line for line in seen["console"] if line.startswith("pageerror")], seen["console"]

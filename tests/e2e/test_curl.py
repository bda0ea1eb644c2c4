"""curl, driven by the examples of docs/http-api.md exactly as written there, against a real server."""

from __future__ import annotations

import hashlib
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from tests.e2e import docs_examples as doc
from tests.e2e.files import write_distinct_blocks
from tests.fixtures.server import Server

pytestmark = pytest.mark.e2e

REPORT_SIZE_MIB = 70  # the create example declares "size": 73400320, i.e. 70 MiB


@pytest.fixture
def workdirs(tmp_path: Path) -> tuple[Path, Path]:
    """``up`` holds the files the upload examples name; ``down`` receives what the download examples write."""
    up, down = tmp_path / "up", tmp_path / "down"
    up.mkdir()
    down.mkdir()
    return up, down


def as_json(result: Any) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(result.stdout)
    return body


def test_chunked_upload_with_curl_as_documented(server: Server, workdirs: tuple[Path, Path]) -> None:
    up, _ = workdirs
    sha = write_distinct_blocks(up / "report.pdf", REPORT_SIZE_MIB)
    b = server.url

    created = as_json(doc.run(doc.line("-X POST $B/v1/uploads "), up, B=b))
    u = created["upload_id"]
    chunk_example = doc.block("/chunks/3")
    for index in range(created["chunk_count"]):
        # The example sends chunk 3; the same commands with another index send the others.
        script = re.sub(r"skip=3\b", f"skip={index}", chunk_example)
        script = re.sub(r"chunk3\b", f"chunk{index}", script).replace("/chunks/3", f"/chunks/{index}")
        answer = as_json(doc.run(script, up, B=b, U=u))
        assert answer["index"] == index
    status = as_json(doc.run(doc.line("curl -s $B/v1/uploads/$U"), up, B=b, U=u))
    artifact = as_json(doc.run(doc.line("/complete"), up, B=b, U=u, SHA=sha))

    assert created["chunk_size"] == 8 * 1024 * 1024
    assert status["missing"] == []
    assert status["bytes_received"] == REPORT_SIZE_MIB * 1024 * 1024
    assert artifact["sha256"] == sha
    assert artifact["size"] == REPORT_SIZE_MIB * 1024 * 1024


def test_single_request_uploads_with_curl_as_documented(server: Server, workdirs: tuple[Path, Path]) -> None:
    up, _ = workdirs
    png = io.BytesIO()
    Image.new("RGB", (40, 30), "red").save(png, format="PNG")
    (up / "chart.png").write_bytes(png.getvalue())
    report = up / "report.pdf"
    report.write_bytes(b"%PDF-1.4\n" + bytes(range(256)) * 1000)

    form = as_json(doc.run(doc.line("-F file=@chart.png"), up, B=server.url))
    raw = as_json(doc.run(doc.line("-T report.pdf"), up, B=server.url))

    assert form["name"] == "chart.png"
    assert form["sha256"] == hashlib.sha256(png.getvalue()).hexdigest()
    assert form["media"]["width"] == 40
    assert form["media"]["height"] == 30
    assert form["expires_at"] is not None
    assert raw["name"] == "report.pdf"
    assert raw["sha256"] == hashlib.sha256(report.read_bytes()).hexdigest()


def test_downloads_with_curl_as_documented(server: Server, workdirs: tuple[Path, Path]) -> None:
    up, down = workdirs
    sha = write_distinct_blocks(up / "report.pdf", 3)
    data = (up / "report.pdf").read_bytes()
    artifact = as_json(doc.run(doc.line("-T report.pdf"), up, B=server.url))
    v = {"B": server.url, "A": artifact["id"], "SHA": sha}

    doc.run(doc.line("# whole"), down, **v)
    whole = (down / "report.pdf").read_bytes()
    first_500 = doc.run(doc.line("-r 0-499"), down, **v).stdout
    multi = doc.run(doc.line("bytes=0-0,-1"), down, **v).stdout
    not_modified = doc.run(doc.line("If-None-Match"), down, **v).stdout
    (down / "report.pdf").write_bytes(data[:1_000_000])
    doc.run(doc.line("-C -"), down, **v)
    resumed = (down / "report.pdf").read_bytes()
    head = doc.run(doc.line("curl -sI"), down, **v).stdout.decode()
    window_headers = doc.run(doc.line("offset=1048576&length=1048576"), down, **v).stdout.decode()

    assert whole == data
    assert first_500 == data[:500]
    assert b"Content-Range: bytes 0-0/" in multi
    assert b"Content-Range: bytes " + str(len(data) - 1).encode() in multi
    assert not_modified.strip() == b"304"
    assert resumed == data
    assert re.search(r"(?im)^etag: \"sha256-" + sha + '"', head)
    assert re.search(rf"(?im)^content-length: {len(data)}\s*$", head)
    assert window_headers.startswith("HTTP/1.1 206")
    assert (down / "part").read_bytes() == data[1048576:2097152]


def test_artifact_management_with_curl_as_documented(server: Server, workdirs: tuple[Path, Path]) -> None:
    up, _ = workdirs
    (up / "report.pdf").write_bytes(b"%PDF-1.4\nsmall")
    artifact = as_json(doc.run(doc.line("-T report.pdf"), up, B=server.url))
    v = {"B": server.url, "A": artifact["id"]}

    ready = as_json(doc.run(doc.line("/readyz"), up, **v))
    listed = as_json(doc.run(doc.line("limit=50"), up, **v))
    got = as_json(doc.run(doc.line("curl -s $B/v1/artifacts/$A"), up, **v))
    pinned = as_json(doc.run(doc.line('{"pinned": true}'), up, **v))
    doc.run(doc.line("-X DELETE $B/v1/artifacts/$A"), up, **v)
    gone = doc.run('curl -s -o /dev/null -w "%{http_code}" $B/v1/artifacts/$A', up, **v).stdout

    assert ready["status"] == "ok"
    assert artifact["id"] in {item["id"] for item in listed["items"]}
    assert got == artifact | {"content_url": got["content_url"]}
    assert pinned["pinned"] is True
    assert gone == b"404"


def test_aborting_an_upload_with_curl_as_documented(server: Server, workdirs: tuple[Path, Path]) -> None:
    up, _ = workdirs
    created = as_json(doc.run(doc.line("-X POST $B/v1/uploads "), up, B=server.url))

    doc.run(doc.line("curl -s -X DELETE $B/v1/uploads/$U"), up, B=server.url, U=created["upload_id"])
    status = as_json(doc.run(doc.line("curl -s $B/v1/uploads/$U"), up, B=server.url, U=created["upload_id"]))

    assert (status["status"], status["code"]) == (404, "not_found")  # an aborted upload is gone

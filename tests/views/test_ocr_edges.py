"""OCR at the edges: ``read_artifact(uri, ocr=true[, region])`` of an image and ``read_artifact(uri, pages=…,
page_format="ocr")`` of a PDF, their resources (``…/ocr.txt``, ``…/ocr.json``, ``…/pages/{n}/ocr.json``, in
``resources/read`` and in a tool's artifact-URI argument) and their HTTP routes, over real transports with
the real Tesseract reading text printed in a real font (DejaVu Sans), and the refusals of the catalogue."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult, ResourceLink, TextContent, TextResourceContents

from blobstore.api.app import create_app
from blobstore.config import Settings
from blobstore.runtime import open_service
from mcp_resources.tools.binary_schema import binary_sites
from mcp_resources.tools.handles import ArgumentHandles
from tests.fixtures.asgi import app_client
from tests.fixtures.server import BLOBSTORE
from tests.mcp.conftest import CALLER, NAMESPACE, put
from tests.views import media
from tests.views.conftest import PRINTED_LINES, MediaSet, connect
from tests.views.test_ocr_engine import overlap

PRINTED_WORDS = " ".join(PRINTED_LINES).split()
PRINTED_PNG = media.printed_text(PRINTED_LINES)[0]
SECOND_LINE = "0,60,600,78"
"""A region holding the second printed line only (its ink is at y 71-92 of 138)."""


def uri(media_set: MediaSet, name: str) -> str:
    return f"blobstore://artifacts/{media_set.ids[name]}"


def texts(result: CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, TextContent)]


def error_of(result: CallToolResult) -> tuple[str, str]:
    assert result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content["error"]["code"], result.structured_content["error"]["message"]


@pytest.fixture(scope="module")
def printed_boxes() -> list[tuple[str, media.Box]]:
    """Each printed word of printed.png with the box its ink covers, as Pillow drew it."""
    return media.printed_text(PRINTED_LINES)[1]


@pytest.mark.parametrize("transport", ["memory-legacy", "stdio", "http"])
async def test_ocr_of_an_image_is_its_text_with_each_words_box_and_confidence(
    transport: str,
    media_set: MediaSet,
    request: pytest.FixtureRequest,
    printed_boxes: list[tuple[str, media.Box]],
) -> None:
    async with connect(transport, media_set, request) as client:
        whole = await client.call_tool("read_artifact", {"uri": uri(media_set, "printed.png"), "ocr": True})
        part = await client.call_tool(
            "read_artifact", {"uri": uri(media_set, "printed.png"), "ocr": True, "region": SECOND_LINE}
        )
    assert not whole.is_error, whole.content
    head, text, tail = texts(whole)
    assert head.startswith(
        "printed.png, OCR text of 558x138 px: 13 words in 2 lines, 0 under 0.9 confidence marked [?word]; "
    )
    assert text.splitlines() == PRINTED_LINES
    assert tail.startswith("A word marked [?word] is to be confirmed, never evidence")
    assert isinstance(whole.structured_content, dict)
    view = whole.structured_content["view"]
    assert (view["kind"], view["words_read"], view["words_to_confirm"]) == ("ocr", 13, 0)
    assert [line["text"] for line in view["lines"]] == PRINTED_LINES
    words = [word for line in view["lines"] for word in line["words"]]
    assert [word["text"] for word in words] == PRINTED_WORDS
    for word, (_, drawn) in zip(words, printed_boxes, strict=True):
        assert overlap(word["box"], drawn) > 0.6, (word, drawn)
        assert 0.9 <= word["confidence"] <= 1
    # A region is read alone, its boxes in the original's pixels, not the crop's.
    assert not part.is_error, part.content
    assert texts(part)[0].startswith(
        "printed.png, OCR text of region 0,60,558,78 of 558x138 px: 6 words in 1 line"
    )
    assert texts(part)[1] == PRINTED_LINES[1]
    assert isinstance(part.structured_content, dict)
    (line,) = part.structured_content["view"]["lines"]
    for word, (_, drawn) in zip(line["words"], printed_boxes[7:], strict=True):
        assert overlap(word["box"], drawn) > 0.6, (word, drawn)


async def test_words_under_the_threshold_are_marked_and_counted_in_the_first_line(
    media_set: MediaSet, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One cached reading serves every threshold: a strict one marks the words Tesseract was least sure of.
    monkeypatch.setattr(
        media_set, "settings", media_set.settings.model_copy(update={"ocr_min_confidence": 0.96})
    )
    async with connect("memory", media_set, request) as client:
        result = await client.call_tool("read_artifact", {"uri": uri(media_set, "printed.png"), "ocr": True})
    assert not result.is_error, result.content
    head, text, _ = texts(result)
    assert isinstance(result.structured_content, dict)
    words = [word for line in result.structured_content["view"]["lines"] for word in line["words"]]
    unsure = [word["text"] for word in words if word["confidence"] < 0.96]
    assert 0 < len(unsure) < len(words)
    assert f"13 words in 2 lines, {len(unsure)} under 0.96 confidence marked [?word]" in head
    assert [word[2:-1] for word in text.split() if word.startswith("[?")] == unsure
    assert result.structured_content["view"]["words_to_confirm"] == len(unsure)


@pytest.mark.parametrize("transport", ["stdio-legacy", "http"])
async def test_a_pdf_page_read_by_ocr_has_its_words_boxes_in_the_pixels_of_its_300_dpi_rendering(
    transport: str, media_set: MediaSet, request: pytest.FixtureRequest
) -> None:
    # report.pdf has a text layer; page_format="ocr" reads the rendered page all the same (positions).
    async with connect(transport, media_set, request) as client:
        result = await client.call_tool(
            "read_artifact", {"uri": uri(media_set, "report.pdf"), "pages": "3", "page_format": "ocr"}
        )
    assert not result.is_error, result.content
    head, page, tail = texts(result)
    assert isinstance(result.structured_content, dict)
    (stated,) = result.structured_content["view"]["page_ocr"]
    assert (stated["page"], stated["width"], round(stated["height"], -1)) == (3, 2550, 3300)
    ((word,),) = [line["words"] for line in stated["lines"]]
    assert word["text"] == media.marker(3)
    # A lone word has no neighbours to make Tesseract sure of it: read right, and marked as it is unsure.
    unsure = word["confidence"] < 0.9
    counts = f"1 word in 1 line, {int(unsure)} under 0.9 confidence marked [?word]"
    assert head.startswith(f"report.pdf, page 3 of 12, OCR text: {counts}; about ")
    shown = f"[?{media.marker(3)}]" if unsure else media.marker(3)
    assert page.splitlines() == [f"--- page 3 of 12 (OCR: {counts}) ---", shown]
    assert tail.startswith('Next: read_artifact(uri, pages="4", page_format="ocr"). A word marked [?word]')
    # The marker is drawn 72 pt from the left, its baseline 92 pt from the top, in 20 pt Helvetica (capitals
    # 14.3 pt high): at 300 dpi, 300 px from the left, its top 324 px down, about 60 px high.
    x, y, _, h = word["box"]
    assert abs(x - 300) <= 8, word
    assert abs(y - 324) <= 6, word
    assert abs(h - 60) <= 6, word


async def test_ocr_resources_are_read_and_listed_and_passed_as_tool_arguments(
    media_set: MediaSet, request: pytest.FixtureRequest
) -> None:
    image, pdf = uri(media_set, "printed.png"), uri(media_set, "report.pdf")
    async with connect("stdio", media_set, request) as client:
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
        text = (await client.read_resource(f"{image}/ocr.txt?region={SECOND_LINE}")).contents
        whole = (await client.read_resource(f"{image}/ocr.json")).contents
        page = (await client.read_resource(f"{pdf}/pages/2/ocr.json")).contents
    assert {
        "blobstore://artifacts/{artifact_id}/ocr.txt{?region}",
        "blobstore://artifacts/{artifact_id}/ocr.json{?region}",
        "blobstore://artifacts/{artifact_id}/pages/{page}/ocr.json",
    } <= templates
    assert isinstance(text[0], TextResourceContents)
    assert (text[0].mime_type, text[0].text) == ("text/plain", PRINTED_LINES[1])
    assert isinstance(whole[0], TextResourceContents)
    document = json.loads(whole[0].text)
    assert (document["words_read"], document["region"]) == (13, [0, 0, 558, 138])
    assert [line["text"] for line in document["lines"]] == PRINTED_LINES
    assert isinstance(page[0], TextResourceContents)
    assert [line["text"] for line in json.loads(page[0].text)["lines"]] == [media.marker(2)]
    # A tool's argument may name the OCR text as it names any view: it gets that text.
    schema = {"type": "object", "properties": {"notes": {"type": "string", "contentMediaType": "text/plain"}}}
    async with open_service(media_set.settings) as service:
        handles = ArgumentHandles(service)
        resolved = await handles.resolve(
            CALLER, tool="summarise", arguments={"notes": f"{image}/ocr.txt"}, sites=binary_sites(schema)
        )
    assert resolved is not None
    assert resolved["notes"].splitlines() == PRINTED_LINES


async def test_ocr_refusals_name_their_reason_and_are_never_internal(
    media_set: MediaSet, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with open_service(media_set.settings) as service:
        bomb = (await put(service, media.png_bomb(30_000), "bomb.png")).id
        broken = (
            await put(service, b"\x89PNG\r\n\x1a\n" + b"not really a png" * 8, "broken.png", "image/png")
        ).id
    monkeypatch.setattr(
        media_set, "settings", media_set.settings.model_copy(update={"ocr_languages": "eng+deu"})
    )
    async with connect("memory", media_set, request) as client:
        no_pack = await client.call_tool("read_artifact", {"uri": uri(media_set, "printed.png"), "ocr": True})
        no_pack_page = await client.call_tool(
            "read_artifact", {"uri": uri(media_set, "report.pdf"), "pages": "1", "page_format": "ocr"}
        )
        wav = await client.call_tool("read_artifact", {"uri": uri(media_set, "pattern.wav"), "ocr": True})
        sized = await client.call_tool(
            "read_artifact", {"uri": uri(media_set, "printed.png"), "ocr": True, "max_edge": 300}
        )
        both = await client.call_tool(
            "read_artifact", {"uri": uri(media_set, "report.pdf"), "pages": "1", "ocr": True}
        )
    assert error_of(no_pack) == (
        "unsupported_media",
        "the OCR language pack deu is not installed (Debian: tesseract-ocr-deu)",
    )
    assert error_of(no_pack_page)[0] == "unsupported_media"
    assert error_of(wav)[0] == "unsupported_media"
    assert error_of(sized) == (
        "invalid_request",
        "OCR reads the original's pixels: max_edge sizes a picture, leave it out",
    )
    assert error_of(both) == ("invalid_request", "ask for one view per call, not pages and OCR")
    monkeypatch.undo()
    async with connect("memory", media_set, request) as client:
        bombed = await client.call_tool(
            "read_artifact", {"uri": f"blobstore://artifacts/{bomb}", "ocr": True}
        )
        bad = await client.call_tool("read_artifact", {"uri": f"blobstore://artifacts/{broken}", "ocr": True})
    assert error_of(bombed)[0] == "view_too_large"
    assert error_of(bad)[0] == "media_invalid"


async def test_without_an_ocr_engine_the_answer_says_so(media_set: MediaSet, tmp_path: Path) -> None:
    # `blobstore mcp` over stdio whose PATH has no tesseract: its workers find none either.
    params = StdioServerParameters(
        command=BLOBSTORE,
        args=["mcp", "--data-dir", str(media_set.settings.data_dir), "--namespace", NAMESPACE],
        env={"PATH": str(tmp_path), "HOME": os.environ.get("HOME", str(tmp_path))},
    )
    async with Client(params) as client:
        # A region never read before, so that no cached reading answers.
        result = await client.call_tool(
            "read_artifact", {"uri": uri(media_set, "printed.png"), "ocr": True, "region": "1,1,300,100"}
        )
    assert error_of(result) == (
        "unsupported_media",
        "no OCR engine is installed (Tesseract: Debian's tesseract-ocr)",
    )


# -- HTTP -------------------------------------------------------------------------------------------------


@pytest.fixture
async def http(views_http: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=views_http, timeout=60)


async def test_ocr_over_http_is_json_or_text_immutable_with_head_and_304(
    http: httpx.AsyncClient, media_set: MediaSet, printed_boxes: list[tuple[str, media.Box]]
) -> None:
    image, pdf = media_set.ids["printed.png"], media_set.ids["report.pdf"]
    async with http:
        document = await http.get(f"/v1/artifacts/{image}/ocr.json")
        text = await http.get(f"/v1/artifacts/{image}/ocr.txt", params={"region": SECOND_LINE})
        head = await http.head(f"/v1/artifacts/{image}/ocr.txt", params={"region": SECOND_LINE})
        again = await http.get(
            f"/v1/artifacts/{image}/ocr.txt",
            params={"region": SECOND_LINE},
            headers={"If-None-Match": text.headers["etag"]},
        )
        whole_text = await http.get(f"/v1/artifacts/{image}/ocr.txt")
        page = await http.get(f"/v1/artifacts/{pdf}/pages/3/ocr.json")
        page_head = await http.head(f"/v1/artifacts/{pdf}/pages/3/ocr.json")
    assert document.status_code == 200
    assert document.headers["content-type"] == "application/json"
    assert "immutable" in document.headers["cache-control"]
    found = document.json()
    assert (found["source_width"], found["source_height"], found["words_read"]) == (558, 138, 13)
    words = [word for line in found["lines"] for word in line["words"]]
    for word, (_, drawn) in zip(words, printed_boxes, strict=True):
        assert overlap(word["box"], drawn) > 0.6
    assert text.status_code == 200
    assert text.headers["content-type"] == "text/plain; charset=utf-8"
    assert text.text == PRINTED_LINES[1]
    assert (text.headers["x-ocr-words"], text.headers["x-ocr-words-to-confirm"]) == ("6", "0")
    assert text.headers["x-ocr-min-confidence"] == "0.9"
    assert (head.status_code, head.content) == (200, b"")
    assert {k: head.headers[k] for k in ("etag", "content-length", "x-ocr-words")} == {
        "etag": text.headers["etag"],
        "content-length": str(len(text.content)),
        "x-ocr-words": "6",
    }
    assert (again.status_code, again.content) == (304, b"")
    assert whole_text.text.splitlines() == PRINTED_LINES
    assert whole_text.headers["etag"] != text.headers["etag"]
    assert page.status_code == 200
    assert page.json()["page"] == 3
    assert [line["text"] for line in page.json()["lines"]] == [media.marker(3)]
    assert page_head.headers["etag"] == page.headers["etag"]


async def test_ocr_routes_refuse_with_problems_of_the_catalogue(
    http: httpx.AsyncClient, media_set: MediaSet
) -> None:
    image, pdf, wav = media_set.ids["printed.png"], media_set.ids["report.pdf"], media_set.ids["pattern.wav"]
    async with http:
        bad_region = await http.get(f"/v1/artifacts/{image}/ocr.txt", params={"region": "0,0,10"})
        empty_region = await http.get(f"/v1/artifacts/{image}/ocr.json", params={"region": "0,0,0,10"})
        of_audio = await http.get(f"/v1/artifacts/{wav}/ocr.json")
        of_pdf = await http.get(f"/v1/artifacts/{pdf}/ocr.txt")
        past = await http.get(f"/v1/artifacts/{pdf}/pages/13/ocr.json")
        foreign = await http.get(f"/v1/artifacts/{media_set.foreign_pdf}/pages/1/ocr.json")
    for response, status, code in (
        (bad_region, 400, "invalid_request"),
        (empty_region, 400, "invalid_request"),
        (of_audio, 415, "unsupported_media"),
        (of_pdf, 415, "unsupported_media"),
        (past, 404, "not_found"),
        (foreign, 404, "not_found"),
    ):
        assert response.status_code == status, response.text
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["code"] == code
    assert past.json()["pages"] == 12


async def test_over_http_every_refusal_is_a_problem_of_the_catalogue_and_a_threshold_is_part_of_the_etag(
    tmp_path: Path,
) -> None:
    # A store of its own: the media set's is served by a running server, which holds its data directory.
    plain = Settings(data_dir=tmp_path / "data")
    async with app_client(create_app(plain)) as http:
        image = await http.post("/v1/artifacts", params={"name": "printed.png"}, content=PRINTED_PNG)
        pdf = await http.post("/v1/artifacts", params={"name": "one.pdf"}, content=media.text_pdf(1))
        bomb = await http.post("/v1/artifacts", params={"name": "bomb.png"}, content=media.png_bomb(30_000))
        broken = await http.post(
            "/v1/artifacts",
            params={"name": "broken.png", "mime_type": "image/png"},
            content=b"\x89PNG\r\n\x1a\n" + b"not really a png" * 8,
        )
        path = f"/v1/artifacts/{image.json()['id']}/ocr.txt"
        before = await http.get(path)
        too_large = await http.get(f"/v1/artifacts/{bomb.json()['id']}/ocr.json")
        invalid = await http.get(f"/v1/artifacts/{broken.json()['id']}/ocr.json")
    async with app_client(create_app(plain.model_copy(update={"view_timeout_seconds": 0.001}))) as http:
        late = await http.get(path, params={"region": "0,0,100,100"})
    for response, status, code in (
        (too_large, 413, "view_too_large"),
        (invalid, 422, "media_invalid"),
        (late, 504, "view_timeout"),
    ):
        assert response.status_code == status, response.text
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["code"] == code
    async with app_client(create_app(plain.model_copy(update={"ocr_min_confidence": 0.99}))) as http:
        stricter = await http.get(path, headers={"If-None-Match": before.headers["etag"]})
    async with app_client(create_app(plain.model_copy(update={"ocr_languages": "eng+deu"}))) as http:
        no_pack = await http.get(path)
        no_pack_page = await http.get(f"/v1/artifacts/{pdf.json()['id']}/pages/1/ocr.json")
    assert before.status_code == 200
    assert before.text.splitlines() == PRINTED_LINES
    # The client's copy was marked at 0.9: at 0.99 the text differs, so it is sent again, not a 304.
    assert stricter.status_code == 200
    assert stricter.headers["etag"] != before.headers["etag"]
    assert int(stricter.headers["x-ocr-words-to-confirm"]) == stricter.text.count("[?") > 0
    for response in (no_pack, no_pack_page):
        assert response.status_code == 415
        assert response.headers["content-type"] == "application/problem+json"
        problem = response.json()
        assert (problem["code"], problem["detail"]) == (
            "unsupported_media",
            "the OCR language pack deu is not installed (Debian: tesseract-ocr-deu)",
        )


async def test_the_api_document_names_the_ocr_routes_and_their_answers(
    http: httpx.AsyncClient, media_set: MediaSet
) -> None:
    async with http:
        paths = (await http.get("/openapi.json")).json()["paths"]
    for path, operation, media_type in (
        ("/v1/artifacts/{artifact_id}/ocr.json", "image_ocr", "application/json"),
        ("/v1/artifacts/{artifact_id}/ocr.txt", "image_ocr_text", "text/plain"),
        ("/v1/artifacts/{artifact_id}/pages/{page}/ocr.json", "page_ocr", "application/json"),
    ):
        get, head = paths[path]["get"], paths[path]["head"]
        assert (get["operationId"], head["operationId"]) == (operation, f"head_{operation}")
        assert media_type in get["responses"]["200"]["content"]
        assert {"304", "404", "413", "415", "422", "504"} <= set(get["responses"])
    region = next(
        p for p in paths["/v1/artifacts/{artifact_id}/ocr.txt"]["get"]["parameters"] if p["name"] == "region"
    )
    assert (region["in"], region["schema"]["maxLength"]) == ("query", 60)


async def test_ocr_text_over_the_answers_budget_is_linked_to_the_resource_that_reads_it(
    media_set: MediaSet, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    small = {"inline_limit": 8, "mcp_window_max": 8}
    monkeypatch.setattr(media_set, "settings", media_set.settings.model_copy(update=small))
    async with connect("memory", media_set, request) as client:
        image = await client.call_tool("read_artifact", {"uri": uri(media_set, "printed.png"), "ocr": True})
        page = await client.call_tool(
            "read_artifact", {"uri": uri(media_set, "report.pdf"), "pages": "3", "page_format": "ocr"}
        )
        links = [
            next(block for block in result.content if isinstance(block, ResourceLink))
            for result in (image, page)
        ]
        read = [(await client.read_resource(str(link.uri))).contents[0] for link in links]
    assert [str(link.uri) for link in links] == [
        f"{uri(media_set, 'printed.png')}/ocr.txt",
        f"{uri(media_set, 'report.pdf')}/pages/3/ocr.json",
    ]
    for link, contents in zip(links, read, strict=True):
        assert isinstance(contents, TextResourceContents)
        assert (link.mime_type, link.size) == (contents.mime_type, len(contents.text.encode("utf-8")))
    assert isinstance(read[0], TextResourceContents)
    assert read[0].text.splitlines() == PRINTED_LINES

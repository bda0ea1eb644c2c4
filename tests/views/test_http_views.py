"""Media views over HTTP, against ``blobstore serve``: the routes, their types and their caching."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import httpx
import pytest
from mcp.types import ImageContent
from PIL import Image

from tests.fixtures.png_chunks import rebuilt, tiny_image_png
from tests.views import media
from tests.views.conftest import PDF_PAGES, MediaSet, connect


@pytest.fixture
async def http(views_http: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=views_http, timeout=60)


async def test_a_page_text_holds_its_marker_and_is_immutable(
    http: httpx.AsyncClient, media_set: MediaSet
) -> None:
    pdf = media_set.ids["report.pdf"]
    async with http:
        response = await http.get(f"/v1/artifacts/{pdf}/pages/11.txt")
        again = await http.get(
            f"/v1/artifacts/{pdf}/pages/11.txt", headers={"If-None-Match": response.headers["etag"]}
        )
        other = await http.get(f"/v1/artifacts/{pdf}/pages/10.txt")
        past = await http.get(f"/v1/artifacts/{pdf}/pages/{PDF_PAGES + 1}.txt")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/plain; charset=utf-8"
    assert media.marker(11) in response.text
    assert media.marker(10) not in response.text
    assert "immutable" in response.headers["cache-control"]
    assert again.status_code == 304
    assert again.content == b""
    assert other.headers["etag"] != response.headers["etag"]
    assert (past.status_code, past.json()["code"], past.json()["pages"]) == (404, "not_found", PDF_PAGES)


async def test_a_page_image_is_a_png_within_max_edge(http: httpx.AsyncClient, media_set: MediaSet) -> None:
    async with http:
        response = await http.get(f"/v1/artifacts/{media_set.ids['report.pdf']}/pages/1.png?max_edge=300")
    assert response.status_code == 200
    assert response.headers["content-type"] == "image/png"
    assert response.content.startswith(b"\x89PNG")


async def test_an_audio_segment_is_a_16_khz_mono_wav_of_the_source(
    http: httpx.AsyncClient, media_set: MediaSet
) -> None:
    async with http:
        response = await http.get(f"/v1/artifacts/{media_set.ids['pattern.wav']}/audio?start=40&duration=30")
    assert response.status_code == 200
    assert response.headers["content-type"] == "audio/wav"
    assert (response.headers["x-view-start-seconds"], response.headers["x-view-end-seconds"]) == (
        "40.0",
        "70.0",
    )
    channels, rate, _, pcm = media.samples_of(response.content)
    assert (channels, rate, len(pcm)) == (1, 16_000, 2 * 30 * 16_000)
    assert pcm[:2] == media.pattern_sample(40 * 16_000).to_bytes(2, "little", signed=True)


async def test_frames_list_their_times_and_image_urls(http: httpx.AsyncClient, media_set: MediaSet) -> None:
    async with http:
        listing = await http.get(f"/v1/artifacts/{media_set.ids['clip.mp4']}/frames?count=3&mode=even")
        assert listing.status_code == 200
        body = listing.json()
        images = [await http.get(frame["url"]) for frame in body["frames"]]
    assert [frame["time_seconds"] for frame in body["frames"]] == [1.0, 3.0, 5.0]
    # The listing is a view of immutable content like the frames it lists.
    assert "immutable" in listing.headers["cache-control"]
    assert listing.headers["etag"].startswith('"view-')
    assert body["video"]["duration_seconds"] == 6.0
    for frame, image in zip(body["frames"], images, strict=True):
        assert image.headers["content-type"] == "image/jpeg"
        assert abs(media.gray_level(image.content) - 4 * round(frame["time_seconds"] * 10)) < 4


@pytest.mark.parametrize(
    ("name", "path"),
    [
        ("report.pdf", "pages/2.txt"),
        ("report.pdf", "pages/2.png?max_edge=200"),
        ("pattern.wav", "audio?start=1&duration=2"),
        ("clip.mp4", "frames?count=2&mode=even"),
        ("clip.mp4", "frames/1.jpg?count=2&mode=even"),
        ("scenes.mp4", "frames?count=2"),
        ("scenes.mp4", "frames/1.jpg?count=2"),
    ],
)
async def test_head_of_a_view_sends_the_headers_of_its_get_without_the_body(
    http: httpx.AsyncClient, media_set: MediaSet, name: str, path: str
) -> None:
    url = f"/v1/artifacts/{media_set.ids[name]}/{path}"
    async with http:
        head = await http.head(url)
        get = await http.get(url)
        fresh = await http.head(url, headers={"If-None-Match": get.headers.get("etag", '"none"')})
    assert (head.status_code, get.status_code) == (200, 200)
    assert head.content == b""
    assert int(head.headers["content-length"]) == len(get.content) > 0
    same = ("content-type", "etag", "cache-control", "last-modified", "x-view-start-seconds")
    assert {key: head.headers.get(key) for key in same} == {key: get.headers.get(key) for key in same}
    assert "immutable" in get.headers["cache-control"]
    assert fresh.status_code == 304


async def test_head_of_a_page_past_the_last_is_404_like_its_get(
    http: httpx.AsyncClient, media_set: MediaSet
) -> None:
    async with http:
        head = await http.head(f"/v1/artifacts/{media_set.ids['report.pdf']}/pages/{PDF_PAGES + 1}.png")
    assert (head.status_code, head.content) == (404, b"")


async def test_views_answer_problems_with_the_catalogue_codes(
    http: httpx.AsyncClient, media_set: MediaSet
) -> None:
    async with http:
        wrong = await http.get(f"/v1/artifacts/{media_set.ids['report.pdf']}/audio")
        foreign = await http.get(f"/v1/artifacts/{media_set.foreign_pdf}/pages/1.txt")
        long = await http.get(f"/v1/artifacts/{media_set.ids['pattern.wav']}/audio?duration=31")
    assert (wrong.status_code, wrong.json()["code"]) == (415, "unsupported_media")
    assert (foreign.status_code, foreign.json()["code"]) == (404, "not_found")
    assert (long.status_code, long.json()["code"]) == (400, "invalid_request")


async def test_a_bad_file_is_a_422_media_invalid_and_a_tool_error(
    http: httpx.AsyncClient, media_set: MediaSet, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    locked = media.encrypted_pdf(tmp_path)
    async with http:
        stored = await http.post("/v1/artifacts", params={"name": "locked.pdf"}, content=locked)
        assert stored.status_code == 201
        artifact = stored.json()
        page = await http.get(f"/v1/artifacts/{artifact['id']}/pages/1.txt")
    assert "pages" not in artifact["media"]
    assert (page.status_code, page.json()["code"]) == (422, "media_invalid")
    assert "encrypted" in page.json()["detail"]
    async with connect("http", media_set, request) as client:
        result = await client.call_tool("read_artifact", {"uri": artifact["uri"], "pages": "1"})
    assert result.is_error
    assert isinstance(result.structured_content, dict)
    assert result.structured_content["error"]["code"] == "media_invalid"


async def test_a_frames_listing_is_revalidated_by_its_etag_and_differs_by_count(
    http: httpx.AsyncClient, media_set: MediaSet
) -> None:
    path = f"/v1/artifacts/{media_set.ids['clip.mp4']}/frames"
    async with http:
        listing = await http.get(path, params={"count": 2, "mode": "even"})
        again = await http.get(
            path, params={"count": 2, "mode": "even"}, headers={"If-None-Match": listing.headers["etag"]}
        )
        other = await http.get(
            path, params={"count": 3, "mode": "even"}, headers={"If-None-Match": listing.headers["etag"]}
        )
    assert listing.status_code == 200
    assert (again.status_code, again.content) == (304, b"")
    assert again.headers["etag"] == listing.headers["etag"]
    assert other.status_code == 200
    assert other.headers["etag"] != listing.headers["etag"]
    assert len(other.json()["frames"]) == 3


async def test_a_frames_listing_names_each_keyframe_once(
    http: httpx.AsyncClient, media_set: MediaSet
) -> None:
    async with http:
        listing = await http.get(f"/v1/artifacts/{media_set.ids['short.mp4']}/frames?count=8&mode=even")
        body = listing.json()
        images = [await http.get(frame["url"]) for frame in body["frames"]]
    assert [frame["time_seconds"] for frame in body["frames"]] == [0.0, 1.0]
    for frame, image in zip(body["frames"], images, strict=True):
        assert image.status_code == 200
        assert abs(media.gray_level(image.content) - 4 * round(frame["time_seconds"] * 10)) < 4


async def test_the_tiny_image_every_browser_shows_has_its_facts_and_its_region_view(
    http: httpx.AsyncClient, media_set: MediaSet, request: pytest.FixtureRequest
) -> None:
    # server-everything's get-tiny-image: an iCCP chunk whose CRC fails, which browsers drop.
    async with http:
        stored = await http.post("/v1/artifacts", params={"name": "tiny.png"}, content=tiny_image_png())
        broken = await http.post(
            "/v1/artifacts",
            params={"name": "broken.png"},
            content=rebuilt(tiny_image_png(), fix=True, corrupt=b"IDAT"),
        )
    assert stored.status_code == broken.status_code == 201
    artifact = stored.json()
    assert artifact["media"] == {"width": 20, "height": 20, "format": "png"}
    async with connect("http", media_set, request) as client:
        region = await client.call_tool("read_artifact", {"uri": artifact["uri"], "region": "0,0,20,10"})
        refused = await client.call_tool("read_artifact", {"uri": broken.json()["uri"], "region": "0,0,5,5"})
    assert not region.is_error, region.content
    (image,) = [block for block in region.content if isinstance(block, ImageContent)]
    assert Image.open(io.BytesIO(base64.b64decode(image.data))).size == (20, 10)
    assert refused.is_error
    assert isinstance(refused.structured_content, dict)
    assert refused.structured_content["error"]["code"] == "media_invalid"
    assert "critical IDAT chunk" in refused.structured_content["error"]["message"]


async def test_a_truncated_mp3_is_as_long_as_what_decodes_not_as_its_header_claims(
    http: httpx.AsyncClient, tmp_path: Path
) -> None:
    whole = media.tone("mp3", 3.0)
    cut = whole[: len(whole) // 4]  # its Info tag still counts the frames of 3 s
    (tmp_path / "cut.mp3").write_bytes(cut)
    decodable = round(media.decodable_seconds(str(tmp_path / "cut.mp3")), 2)
    assert decodable < 1.0
    async with http:
        stored = await http.post("/v1/artifacts", params={"name": "cut.mp3"}, content=cut)
        artifact = stored.json()
        segment = await http.get(
            f"/v1/artifacts/{artifact['id']}/audio", params={"start": 0.25, "duration": 5}
        )
        past = await http.get(f"/v1/artifacts/{artifact['id']}/audio", params={"start": 1, "duration": 1})
    assert stored.status_code == 201
    assert round(artifact["media"]["duration_seconds"], 2) == decodable
    assert segment.status_code == 200
    assert round(float(segment.headers["x-media-duration-seconds"]), 2) == decodable
    assert round(float(segment.headers["x-view-end-seconds"]), 2) == decodable
    assert (past.status_code, past.json()["code"]) == (422, "media_invalid")
    assert past.json()["detail"] == f"start 1 s is past the end ({decodable:g} s)"

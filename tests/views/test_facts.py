"""Media facts taken at upload by the decoders, and the lines that name the view to read next."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from mcp.types import ResourceLink, TextContent

from blobstore.runtime import open_service
from blobstore.service import ArtifactService
from mcp_resources.reading.resources import StoreResources
from mcp_resources.reading.views import first_view_uri
from mcp_resources.results.content import tool_result_for
from mcp_resources.transports.server import fixed_caller
from tests.mcp.conftest import CALLER, put
from tests.views import media
from tests.views.conftest import PDF_PAGES, MediaSet


@pytest.fixture
async def store(media_set: MediaSet) -> AsyncIterator[ArtifactService]:
    async with open_service(media_set.settings) as service:
        yield service


async def test_a_pdfs_page_count_and_text_layer_are_in_its_json_and_link(
    views_http: str, media_set: MediaSet
) -> None:
    async with httpx.AsyncClient(base_url=views_http) as http:
        report = (await http.get(f"/v1/artifacts/{media_set.ids['report.pdf']}")).json()
        scan = (await http.get(f"/v1/artifacts/{media_set.ids['scan.pdf']}")).json()
    assert (report["media"]["pages"], report["media"]["text_layer"]) == (PDF_PAGES, True)
    assert (scan["media"]["pages"], scan["media"]["text_layer"]) == (2, False)
    description = report["resource_link"]["description"]
    assert f"{PDF_PAGES} pages, text layer" in description
    assert description.endswith('; read page 1 with read_artifact(uri, pages="1")')


@pytest.mark.parametrize(
    ("kind", "rate"), [("wav", 44_100), ("flac", 44_100), ("ogg", 48_000), ("mp3", 44_100)]
)
async def test_audio_facts_of_every_format(
    store: ArtifactService, media_set: MediaSet, kind: str, rate: int
) -> None:
    artifact = await store.get_artifact(CALLER, media_set.ids[f"tone.{kind}"])
    assert artifact.media["duration_seconds"] == pytest.approx(45.0, abs=0.1)
    assert (artifact.media["sample_rate"], artifact.media["channels"]) == (rate, 2)


async def test_video_facts(store: ArtifactService, media_set: MediaSet) -> None:
    artifact = await store.get_artifact(CALLER, media_set.ids["clip.mp4"])
    facts = {key: artifact.media[key] for key in ("duration_seconds", "width", "height", "frame_rate")}
    assert facts == {"duration_seconds": 6.0, "width": 320, "height": 240, "frame_rate": 10.0}


async def test_a_pdf_the_decoder_refuses_is_stored_without_deep_facts(store: ArtifactService) -> None:
    whole = media.text_pdf(3)
    artifact = await put(store, whole[: len(whole) // 2], "cut.pdf")
    assert artifact.mime_type == "application/pdf"
    assert "pages" not in artifact.media


async def test_tool_result_for_a_linked_pdf_names_the_page_view(
    store: ArtifactService, media_set: MediaSet
) -> None:
    artifact = await store.get_artifact(CALLER, media_set.ids["report.pdf"])
    result = await tool_result_for(artifact, service=store, caller=CALLER, inline_limit=1024)
    text, link = result.content
    assert isinstance(text, TextContent)
    assert isinstance(link, ResourceLink)
    assert f"{PDF_PAGES} pages, text layer" in text.text
    assert 'read page 1 with read_artifact(uri, pages="1"), or read it with resources/read' in text.text
    assert link.description is not None
    assert "pages=" in link.description


async def test_tool_result_for_a_long_recording_names_the_segment_view(
    store: ArtifactService, media_set: MediaSet
) -> None:
    artifact = await store.get_artifact(CALLER, media_set.ids["tone.mp3"])
    result = await tool_result_for(artifact, service=store, caller=CALLER, inline_limit=1024)
    text = result.content[0]
    assert isinstance(text, TextContent)
    assert "hear the first 30 s with read_artifact(uri, start_seconds=0, duration_seconds=30)" in text.text


async def test_the_first_view_uri_of_a_pdf_and_a_recording_reads_as_a_view(
    store: ArtifactService, media_set: MediaSet
) -> None:
    report = await store.get_artifact(CALLER, media_set.ids["report.pdf"])
    scan = await store.get_artifact(CALLER, media_set.ids["scan.pdf"])
    tone = await store.get_artifact(CALLER, media_set.ids["tone.flac"])
    picture = await store.get_artifact(CALLER, media_set.ids["picture.png"])
    assert first_view_uri(report) == f"{report.uri}/pages/1.txt"
    assert first_view_uri(scan) == f"{scan.uri}/pages/1.png"
    assert first_view_uri(tone) == f"{tone.uri}/audio?start=0&duration=30"
    assert first_view_uri(picture) is None
    resources = StoreResources(store, fixed_caller(CALLER))
    read = await resources.read(CALLER, str(first_view_uri(tone)))
    assert read.contents[0].mime_type == "audio/wav"

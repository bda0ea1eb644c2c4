"""The views' parameter parsers: every accepted spelling, every refusal precise (Hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from blobstore.errors import InvalidRequest
from blobstore.views.describe import page_list
from blobstore.views.kinds.pages import page_uri
from blobstore.views.kinds.segments import audio_uri
from blobstore.views.params import parse_pages, parse_region
from mcp_resources.reading.views import parse_view_uri

PAGES = st.lists(st.integers(min_value=1, max_value=10_000), min_size=1, max_size=10, unique=True)


@given(PAGES)
def test_a_page_list_parses_back_to_its_pages(pages: list[int]) -> None:
    ordered = sorted(pages)
    assert parse_pages(page_list(ordered), 10) == tuple(ordered)


@given(st.text(max_size=30))
def test_any_text_is_pages_or_a_precise_refusal(spec: str) -> None:
    try:
        pages = parse_pages(spec, 10)
    except InvalidRequest:
        return
    assert 1 <= len(pages) <= 10
    assert all(page >= 1 for page in pages)
    assert len(set(pages)) == len(pages)


@pytest.mark.parametrize("spec", ["0", "5-3", "1-11", "1,2,3,4,5,6,7,8,9,10,11", "a", "", "1,,2", "-3"])
def test_bad_page_specs_are_refused(spec: str) -> None:
    with pytest.raises(InvalidRequest):
        parse_pages(spec, 10)


@given(st.tuples(*[st.integers(min_value=0, max_value=99_999)] * 2, *[st.integers(1, 99_999)] * 2))
def test_a_region_parses_back(region: tuple[int, int, int, int]) -> None:
    assert parse_region(",".join(map(str, region))) == region


@pytest.mark.parametrize("spec", ["1,2,3", "0,0,0,5", "-1,0,5,5", "a,b,c,d", "1,2,3,4,5"])
def test_bad_regions_are_refused(spec: str) -> None:
    with pytest.raises(InvalidRequest):
        parse_region(spec)


@given(st.integers(min_value=1, max_value=9_999_999), st.sampled_from(["txt", "png"]))
def test_page_uris_parse_back(page: int, ext: str) -> None:
    ref = parse_view_uri(page_uri("a_abc", page, ext))  # type: ignore[arg-type]
    assert ref is not None
    assert (ref.artifact_id, ref.page, ref.kind) == (
        "a_abc",
        page,
        "page_text" if ext == "txt" else "page_image",
    )


def test_audio_uris_parse_back_and_others_are_not_views() -> None:
    ref = parse_view_uri(audio_uri("a_abc", 40.0, 30.0))
    assert ref is not None
    assert (ref.kind, ref.start, ref.duration) == ("audio", 40.0, 30.0)
    assert parse_view_uri("blobstore://artifacts/a_abc") is None
    assert parse_view_uri("blobstore://artifacts/a_abc?offset=0&length=5") is None
    with pytest.raises(InvalidRequest):
        parse_view_uri("blobstore://artifacts/a_abc/audio?start=nan")
    with pytest.raises(InvalidRequest):
        parse_view_uri("blobstore://artifacts/a_abc/audio?volume=11")


def test_a_page_image_uri_may_name_its_size_and_nothing_else() -> None:
    ref = parse_view_uri(page_uri("a_abc", 7, "png", 300))
    assert ref is not None
    assert (ref.kind, ref.page, ref.max_edge) == ("page_image", 7, 300)
    assert page_uri("a_abc", 7, "txt", 300) == "blobstore://artifacts/a_abc/pages/7.txt"
    for bad in ("7.txt?max_edge=300", "7.png?max_edge=8", "7.png?max_edge=x", "7.png?size=300"):
        with pytest.raises(InvalidRequest):
            parse_view_uri(f"blobstore://artifacts/a_abc/pages/{bad}")

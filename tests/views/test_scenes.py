"""Scene cuts: a frame-difference measure on small decoded frames (PyAV and numpy) finds where a real video's
picture changes at once (pages of Debian's libtasn1 manual, rendered by PDFium), not where it scrolls or
fades; each scene is shown by one frame; a video of 10,000 one-frame scenes is answered within its bounds; the
HTTP listing's ``?mode=`` (``read_artifact``'s ``frames_mode`` is tested with the other views in
test_mcp_views.py)."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from PIL import Image

from blobstore.runtime import open_service
from blobstore.service import ArtifactService
from blobstore.views.engine import MediaViews
from blobstore.views.engines import av, scenes
from blobstore.views.kinds import frames as jobs
from tests.mcp.conftest import CALLER, put
from tests.views import media
from tests.views.conftest import MediaSet


@pytest.fixture(scope="module")
def videos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("scenes")
    made = {"scenes.mp4": media.scenes_video(), "flashing.mp4": media.flashing_video(10_000)}
    for name, data in made.items():
        (folder / name).write_bytes(data)
    return {name: folder / name for name in made}


def looks_like(jpeg: bytes, page: int) -> float:
    """Mean absolute difference (0-1) of a frame and the still of ``page`` in :func:`media.scenes_video`."""
    with Image.open(io.BytesIO(jpeg)) as image:
        shown = np.asarray(image.convert("L").resize((320, 240)), dtype=np.int16)
    still = media.manual_page(page, 320).crop((0, 40, 320, 280)).convert("L")
    return float(np.abs(shown - np.asarray(still, dtype=np.int16)).mean()) / 255


def test_cuts_between_pages_are_found_and_a_scroll_is_no_cut(videos: dict[str, Path]) -> None:
    decoded = jobs.video_scenes(str(videos["scenes.mp4"]), 8, 320, "frames")
    assert decoded.meta["scenes"] == 3
    assert decoded.meta["scene_starts"] == [0.0, *media.SCENE_CUTS]
    assert decoded.meta["compared"] == "every frame"
    shown = [
        (meta["scene_start_seconds"], meta["scene_end_seconds"], meta["time_seconds"])
        for meta, _ in decoded.parts
    ]
    # Each scene is shown half a second in, not by the first frame after its cut.
    assert shown == [(0.0, 2.0, 0.5), (2.0, 4.0, 2.5), (4.0, 6.0, 4.5)]
    assert looks_like(decoded.parts[1][1], 7) < 0.02
    assert looks_like(decoded.parts[2][1], 20) < 0.02
    assert looks_like(decoded.parts[1][1], 20) > 0.03


def test_fewer_frames_show_the_longest_scenes_in_time_order(videos: dict[str, Path]) -> None:
    decoded = jobs.video_scenes(str(videos["scenes.mp4"]), 2, 320, "frames")
    assert decoded.meta["scenes"] == 3
    # Three scenes of 2 s each: the earlier two of equal length.
    assert [meta["scene_start_seconds"] for meta, _ in decoded.parts] == [0.0, 2.0]
    sheet = jobs.video_scenes(str(videos["scenes.mp4"]), 8, 320, "sheet")
    ((meta, _),) = sheet.parts
    assert (meta["times"], meta["columns"], meta["scenes"]) == ([0.0, 2.0, 4.0], 2, 3)


def test_a_fade_is_one_scene(tmp_path: Path) -> None:
    path = tmp_path / "fade.mp4"
    path.write_bytes(media.numbered_video(6))  # every frame 4 gray levels brighter than the one before
    decoded = jobs.video_scenes(str(path), 8, 320, "frames")
    assert (decoded.meta["scenes"], len(decoded.parts)) == (1, 1)


def test_ten_thousand_one_frame_scenes_are_counted_and_the_answer_stays_small(
    videos: dict[str, Path],
) -> None:
    decoded = jobs.video_scenes(str(videos["flashing.mp4"]), 8, 320, "frames")
    assert decoded.meta["scenes"] == 10_000
    assert len(decoded.meta["scene_starts"]) == jobs.LISTED_SCENES
    assert decoded.meta["scene_starts"][:3] == [0.0, 0.04, 0.08]
    assert len(decoded.parts) == 8
    assert sum(len(data) for _, data in decoded.parts) < 8 * 4096


def test_a_video_past_the_frame_budget_is_compared_keyframe_by_keyframe(
    videos: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jobs, "SCENE_FRAMES", 10)
    seeks: list[int] = []
    keyframes_near = av.keyframes_near

    def counted(path: str, times: list[float]):  # type: ignore[no-untyped-def]
        seeks.append(len(times))
        return keyframes_near(path, times)

    monkeypatch.setattr(av, "keyframes_near", counted)
    decoded = jobs.video_scenes(str(videos["scenes.mp4"]), 8, 320, "frames")
    assert decoded.meta["compared"] == "keyframes"
    assert seeks == [jobs.SCENE_SAMPLES]
    # Its keyframes are at 0, 2.5 and 5 s (every 25 frames): each shows another page, so each starts a scene.
    assert decoded.meta["scene_starts"] == [0.0, 2.5, 5.0]


def test_the_measure_is_zero_for_the_same_frame_and_one_for_black_against_white() -> None:
    black = np.zeros((36, 64, 3), dtype=np.uint8)
    assert scenes.difference(black, black) == 0.0
    assert scenes.difference(black, black + 255) == 1.0
    finder = scenes.CutFinder()
    verdicts = [*finder.add(0.0, black), *finder.add(0.1, black), *finder.add(0.2, black + 255)]
    verdicts += finder.finish()
    assert verdicts == [(0.0, True), (0.1, False), (0.2, True)]


@pytest.fixture
async def store(media_set: MediaSet) -> AsyncIterator[ArtifactService]:
    async with open_service(media_set.settings) as service:
        yield service


async def test_scenes_come_from_a_worker_and_a_second_read_from_the_cache(
    store: ArtifactService, videos: dict[str, Path], tmp_path: Path
) -> None:
    views = MediaViews(store, spool=tmp_path / "spool")
    artifact = await put(store, videos["scenes.mp4"].read_bytes(), "scenes.mp4")
    source = await views.open(CALLER, artifact.id)
    first = await views.scenes(source, 8)
    started = views.runner.started
    again = await views.scenes(source, 8)
    assert views.runner.started == started
    assert [view.meta["scene_start_seconds"] for view in first] == [0.0, 2.0, 4.0]
    assert [view.data for view in again] == [view.data for view in first]
    assert first[0].meta["scene_starts"] == [0.0, 2.0, 4.0]


# -- at the edges -----------------------------------------------------------------------------------------


async def test_the_frames_listing_names_a_frame_of_each_scene_or_evenly_spaced_keyframes(
    views_http: str, media_set: MediaSet
) -> None:
    path = f"/v1/artifacts/{media_set.ids['scenes.mp4']}/frames"
    async with httpx.AsyncClient(base_url=views_http, timeout=60) as http:
        listing = await http.get(path, params={"count": 2})
        images = [await http.get(frame["url"]) for frame in listing.json()["frames"]]
        head = await http.head(listing.json()["frames"][1]["url"])
        again = await http.get(path, params={"count": 2}, headers={"If-None-Match": listing.headers["etag"]})
        even = await http.get(path, params={"count": 2, "mode": "even"})
        past = await http.get(f"{path}/3.jpg", params={"count": 4})
        bad = await http.get(path, params={"mode": "random"})
    assert listing.status_code == 200
    body = listing.json()
    assert (body["mode"], body["scenes"], body["scene_starts"]) == ("scenes", 3, [0.0, *media.SCENE_CUTS])
    # The two longest of three scenes of 2 s each: the earlier two, each shown half a second in.
    assert [
        (frame["scene_start_seconds"], frame["scene_end_seconds"], frame["time_seconds"])
        for frame in body["frames"]
    ] == [(0.0, 2.0, 0.5), (2.0, 4.0, 2.5)]
    assert all(frame["url"].endswith("mode=scenes") for frame in body["frames"])
    assert [image.status_code for image in images] == [200, 200]
    assert looks_like(images[1].content, 7) < 0.02
    assert (head.status_code, head.headers["etag"]) == (200, images[1].headers["etag"])
    assert (again.status_code, again.content) == (304, b"")
    assert even.json()["mode"] == "even"
    assert [frame["time_seconds"] for frame in even.json()["frames"]] == [0.0, 2.5]
    assert even.headers["etag"] != listing.headers["etag"]
    # Four asked of a video of three scenes: there is no fourth frame.
    assert (past.status_code, past.json()["code"]) == (404, "not_found")
    assert "3 scenes" in past.json()["detail"]
    assert (bad.status_code, bad.json()["code"]) == (400, "invalid_request")


def test_the_first_line_lists_at_most_a_hundred_scene_starts_and_says_how_they_were_compared() -> None:
    found = {"scenes": 10_000, "scene_starts": [i * 0.04 for i in range(100)], "compared": "keyframes"}
    line = jobs.scenes_line("flashing.mp4", {"duration_seconds": 400.0, "width": 32, "height": 32}, found)
    assert line.startswith("flashing.mp4, 10000 scenes in 400.0 s (32x32), starting at 0.0, 0.04, 0.08, ")
    assert line.endswith(
        "3.92 and 3.96 s (the first 100 listed); compared keyframe by keyframe (a long video)"
    )
    one = {"scenes": 1, "scene_starts": [0.0], "compared": "every frame"}
    assert jobs.scenes_line("fade.mp4", {"duration_seconds": 6.0, "width": 320, "height": 240}, one) == (
        "fade.mp4, 1 scene in 6.0 s (320x240), starting at 0.0 s"
    )

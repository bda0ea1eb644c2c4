"""The view engine over real media: what each view holds, its limits, its errors and its cache."""

from __future__ import annotations

import io
import os
import struct
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest
from PIL import Image

from blobstore.config import Settings
from blobstore.errors import (
    InvalidRequest,
    MediaInvalid,
    NotFound,
    UnsupportedMedia,
    ViewTimeout,
    ViewTooLarge,
)
from blobstore.runtime import open_service
from blobstore.service import ArtifactService
from blobstore.views.engine import MediaViews
from blobstore.views.progress import reporting
from tests.mcp.conftest import CALLER, put
from tests.views import media
from tests.views.conftest import PDF_PAGES, MediaSet

RATE = 16_000


@pytest.fixture
async def store(media_set: MediaSet) -> AsyncIterator[ArtifactService]:
    async with open_service(media_set.settings) as service:
        yield service


@pytest.fixture
def views(store: ArtifactService, tmp_path: Path) -> MediaViews:
    """An engine with counts of its own, so that they are this test's (its cache is the store's renditions,
    shared with every other engine over the media set)."""
    return MediaViews(store, spool=tmp_path / "spool")


async def test_each_page_text_holds_its_own_marker_and_no_other(
    views: MediaViews, media_set: MediaSet
) -> None:
    source = await views.open(CALLER, media_set.ids["report.pdf"])
    assert await views.facts(source) == {
        "pages": PDF_PAGES,
        "text_layer": True,
        "text_pages_checked": PDF_PAGES,
        "text_pages": PDF_PAGES,
    }
    pages = tuple(range(1, PDF_PAGES + 1, 2))
    texts = await views.page_texts(source, pages)
    for page, view in zip(pages, texts, strict=True):
        text = view.data.decode()
        assert media.marker(page) in text
        assert [other for other in range(1, PDF_PAGES + 1) if media.marker(other) in text] == [page]


async def test_a_page_image_fits_the_long_edge_budget(views: MediaViews, media_set: MediaSet) -> None:
    source = await views.open(CALLER, media_set.ids["report.pdf"])
    view = await views.page_image(source, 3, 400)
    with Image.open(io.BytesIO(view.data)) as image:
        assert image.format == "PNG"
        assert max(image.size) == 400
        assert (view.meta["width"], view.meta["height"]) == image.size


async def test_a_page_without_a_text_layer_comes_as_its_image(views: MediaViews, media_set: MediaSet) -> None:
    source = await views.open(CALLER, media_set.ids["scan.pdf"])
    facts = await views.facts(source)
    assert (facts["pages"], facts["text_layer"]) == (2, False)
    (page,) = await views.pages(source, (2,), "text")
    assert (page.text, page.text_layer) == ("", False)
    assert page.image is not None
    assert page.image.mime_type == "image/png"


async def test_a_page_without_a_text_layer_is_read_by_ocr(views: MediaViews, store: ArtifactService) -> None:
    assert views.ocr, "Tesseract (Debian tesseract-ocr) is installed by .ci/run"
    artifact = await put(store, media.scanned_pdf(["SCANNED PAGE ONE", "invoice total 4711"]), "scan.pdf")
    assert artifact.media["text_layer"] is False
    source = await views.open(CALLER, artifact.id)
    reported: list[tuple[float, float | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        reported.append((done, total))

    with reporting(progress):
        (page,) = await views.pages(source, (1,), "text")
    assert (page.text_layer, page.ocr, page.image) == (False, True, None)
    assert page.text is not None
    assert "SCANNED PAGE ONE" in page.text
    assert "4711" in page.text
    # What the progress notifications tell: once the page is read.
    assert reported == [(1, 1)]


async def test_a_segment_of_the_pattern_is_the_source_samples_at_that_time(
    views: MediaViews, media_set: MediaSet
) -> None:
    source = await views.open(CALLER, media_set.ids["pattern.wav"])
    view = await views.audio(source, 40.0, 30.0)
    channels, rate, width, pcm = media.samples_of(view.data)
    assert (channels, rate, width) == (1, RATE, 2)
    assert len(pcm) // 2 == 30 * RATE
    values = struct.unpack(f"<{len(pcm) // 2}h", pcm)
    assert list(values) == [media.pattern_sample(40 * RATE + i) for i in range(30 * RATE)]
    assert (view.meta["start_seconds"], view.meta["end_seconds"]) == (40.0, 70.0)
    assert view.meta["duration_seconds"] == 70.0
    # Decoding began at a seek next to 40 s, not at the start of the file.
    assert 39.0 <= view.meta["decoded_from_seconds"] <= 40.0


@pytest.mark.parametrize("kind", list(media.AUDIO_FORMATS))
async def test_a_30_second_segment_of_every_audio_format_is_16_khz_mono_and_the_tone(
    views: MediaViews, media_set: MediaSet, kind: str
) -> None:
    source = await views.open(CALLER, media_set.ids[f"tone.{kind}"])
    facts = await views.facts(source)
    assert abs(facts["duration_seconds"] - 45.0) < 0.1
    assert facts["channels"] == 2
    view = await views.audio(source, 10.0, 30.0)
    channels, rate, _, pcm = media.samples_of(view.data)
    assert (channels, rate) == (1, RATE)
    # 30 s, give or take one codec frame (1152 samples of MP3 at 44.1 kHz is 26 ms).
    assert abs(len(pcm) / 2 / RATE - 30.0) <= 0.03
    # A 440 Hz tone crosses zero 880 times a second.
    assert abs(media.zero_crossings(pcm) / 30.0 - 880) < 10
    # Decoding began at a seek near 10 s (a codec frame or a few before it), not at 0.
    assert 9.0 <= view.meta["decoded_from_seconds"] <= 10.0


@pytest.mark.parametrize("kind", list(media.AUDIO_FORMATS))
async def test_a_segment_after_a_seek_starts_at_its_time_in_every_audio_format(
    views: MediaViews, store: ArtifactService, kind: str
) -> None:
    # An MP3 starts with the encoder's delay (about 25 ms), which FFmpeg's timestamps count: a segment
    # must start at its time in the recording, not that much before it.
    artifact = await put(store, media.sweep(kind, 40.0), f"sweep.{kind}")
    source = await views.open(CALLER, artifact.id)
    for start in (10.0, 33.3):
        view = await views.audio(source, start, 2.0)
        _, rate, _, pcm = media.samples_of(view.data)
        assert rate == RATE
        # Within 3 ms (48 samples): a tenth of an MP3 frame, what resampling and packet times leave.
        assert abs(media.sweep_lag(pcm, start)) <= 48, (kind, start)


async def test_keyframes_are_where_the_video_has_them_and_show_their_frame(
    views: MediaViews, media_set: MediaSet
) -> None:
    source = await views.open(CALLER, media_set.ids["clip.mp4"])
    facts = await views.facts(source)
    assert (facts["duration_seconds"], facts["width"], facts["height"], facts["frame_rate"]) == (
        6.0,
        320,
        240,
        10.0,
    )
    frames = await views.frames(source, 3, max_edge=160)
    # The middles of three equal slices of 6 s, each on a keyframe (one a second).
    assert [view.meta["time_seconds"] for view in frames] == [1.0, 3.0, 5.0]
    for view in frames:
        number = round(view.meta["time_seconds"] * media.VIDEO_FPS)
        assert abs(media.gray_level(view.data) - 4 * number) < 4
        assert max(view.meta["width"], view.meta["height"]) == 160
    (sheet,) = await views.frames(source, 4, max_edge=320, layout="sheet")
    assert sheet.meta["times"] == [0.0, 2.0, 3.0, 5.0]
    assert sheet.meta["columns"] == 2


async def test_keyframes_of_a_video_whose_timestamps_start_late_are_timed_from_its_start(
    views: MediaViews, store: ArtifactService
) -> None:
    # An MPEG-TS recording's clock starts where the broadcast was: here at 10 s.
    data = media.numbered_video(6, container_format="mpegts", first_second=10)
    artifact = await put(store, data, "recording.ts", "video/mp2t")
    source = await views.open(CALLER, artifact.id)
    assert (await views.facts(source))["duration_seconds"] == 6.0
    frames = await views.frames(source, 3, max_edge=160)
    assert [view.meta["time_seconds"] for view in frames] == [1.0, 3.0, 5.0]
    for view in frames:
        number = round(view.meta["time_seconds"] * media.VIDEO_FPS)
        assert abs(media.gray_level(view.data) - 4 * number) < 4


async def test_an_image_region_is_cut_in_original_pixels_and_fitted(
    views: MediaViews, media_set: MediaSet
) -> None:
    source = await views.open(CALLER, media_set.ids["picture.png"])
    view = await views.image(source, (100, 50, 200, 100), 100)
    assert view.meta["region"] == [100, 50, 200, 100]
    with Image.open(io.BytesIO(view.data)) as image:
        assert image.size == (100, 50)
        pixel = image.convert("RGB").getpixel((0, 0))
    assert isinstance(pixel, tuple)
    assert pixel[:2] == pytest.approx((100, 50), abs=2)


async def test_a_second_identical_view_is_a_cache_lookup(views: MediaViews, media_set: MediaSet) -> None:
    source = await views.open(CALLER, media_set.ids["report.pdf"])
    await views.page_texts(source, (7,))
    started, computed, hits = views.runner.started, views.cache.computed, views.cache.hits
    (again,) = await views.page_texts(source, (7,))
    assert media.marker(7) in again.data.decode()
    assert (views.runner.started, views.cache.computed) == (started, computed)
    assert views.cache.hits == hits + 1


async def test_views_expire_with_their_source(tmp_path: Path) -> None:
    async with open_service(Settings(data_dir=tmp_path)) as store:
        views = MediaViews(store)
        artifact = await put(store, media.text_pdf(2), "short.pdf")
        source = await views.open(CALLER, artifact.id)
        await views.facts(source)
        await views.page_texts(source, (1,))
        assert (await store.repo.stats(now=store.clock()))["renditions"] == 2  # the facts and the page
        expires = artifact.expires_at
        assert expires is not None
        store.clock.source = lambda: expires + timedelta(seconds=1)
        fresh = MediaViews(store)
        # Past its source's expiry a rendition is a miss, whether or not cleanup has run.
        assert await fresh.cache.lookup(fresh._key(source, {"op": "page_text", "page": 1}), None) is None
        assert fresh.cache.hits == 0


async def test_views_of_a_memory_store_decode_a_spooled_copy(tmp_path: Path) -> None:
    async with open_service(Settings(data_dir=tmp_path, storage_url="memory://")) as service:
        artifact = await put(service, media.text_pdf(3), "memory.pdf")
        views = MediaViews(service)
        source = await views.open(CALLER, artifact.id)
        (text,) = await views.page_texts(source, (2,))
        assert media.marker(2) in text.data.decode()
        assert views.spool.is_dir()
        assert list(views.spool.iterdir()) == []
        assert not (tmp_path / "views").exists()


async def test_another_namespaces_artifact_is_not_found(views: MediaViews, media_set: MediaSet) -> None:
    with pytest.raises(NotFound):
        await views.open(CALLER, media_set.foreign_pdf)


async def test_a_view_of_the_wrong_type_is_unsupported_media(views: MediaViews, media_set: MediaSet) -> None:
    with pytest.raises(UnsupportedMedia):
        await views.open(CALLER, media_set.ids["pattern.wav"], kinds=("pdf",))


async def test_a_segment_over_the_limit_is_refused(views: MediaViews, media_set: MediaSet) -> None:
    source = await views.open(CALLER, media_set.ids["pattern.wav"])
    with pytest.raises(InvalidRequest, match="at most 30 s"):
        await views.audio(source, 0.0, 31.0)


def _bad_files(tmp: Path) -> dict[str, tuple[bytes, str, type[Exception]]]:
    whole = media.text_pdf(4)
    not_png = b"\x89PNG\r\n\x1a\n" + b"this is not a PNG stream at all" * 10
    return {
        "truncated.pdf": (whole[: len(whole) // 2], "application/pdf", MediaInvalid),
        "encrypted.pdf": (media.encrypted_pdf(tmp), "application/pdf", MediaInvalid),
        "looping.pdf": (media.looping_pdf(), "application/pdf", MediaInvalid),
        "not.png": (not_png, "image/png", MediaInvalid),
    }


@pytest.mark.parametrize("name", ["truncated.pdf", "encrypted.pdf", "looping.pdf", "not.png"])
async def test_every_bad_file_gets_its_code(
    views: MediaViews, store: ArtifactService, tmp_path: Path, name: str
) -> None:
    data, mime_type, error = _bad_files(tmp_path)[name]
    artifact = await put(store, data, name, mime_type)
    source = await views.open(CALLER, artifact.id)
    read = views.pages(source, (1,), "text") if source.kind == "pdf" else views.image(source, None)
    with pytest.raises(error) as caught:
        await read
    assert isinstance(caught.value, MediaInvalid)
    assert caught.value.code == "media_invalid"
    if name == "encrypted.pdf":
        assert "encrypted" in str(caught.value)


async def test_a_wav_header_that_lies_about_its_length_gets_media_invalid_past_the_real_end(
    views: MediaViews, store: ArtifactService
) -> None:
    artifact = await put(store, media.lying_wav(600.0), "lying.wav")
    # The header claims 600 s; the artifact's facts are what the decoder measured.
    assert artifact.media["duration_seconds"] == pytest.approx(0.1)
    source = await views.open(CALLER, artifact.id)
    assert (await views.facts(source))["duration_seconds"] == pytest.approx(0.1)
    with pytest.raises(MediaInvalid, match="past the end"):
        await views.audio(source, 40.0, 30.0)


async def test_a_wav_header_with_no_channels_is_media_invalid(
    views: MediaViews, store: ArtifactService
) -> None:
    broken = bytearray(media.pattern_wav(1.0))
    broken[22:24] = b"\0\0"  # channels = 0
    artifact = await put(store, bytes(broken), "nochannels.wav")
    with pytest.raises(MediaInvalid):
        await views.audio(await views.open(CALLER, artifact.id), 0.0, 1.0)


async def test_a_decompression_bomb_is_refused_before_decoding(
    views: MediaViews, store: ArtifactService
) -> None:
    image = Image.new("1", (12_000, 8_000))
    out = io.BytesIO()
    image.save(out, format="PNG")
    artifact = await put(store, out.getvalue(), "bomb.png")
    with pytest.raises(ViewTooLarge):
        await views.image(await views.open(CALLER, artifact.id), None)


async def test_a_decoder_past_its_time_is_killed_and_reported(tmp_path: Path) -> None:
    # A store of its own: the media set's views are cached already.
    async with open_service(Settings(data_dir=tmp_path, view_timeout_seconds=0.001)) as service:
        artifact = await put(service, media.text_pdf(2), "slow.pdf")
        views = MediaViews(service)
        source = await views.open(CALLER, artifact.id)
        with pytest.raises(ViewTimeout):
            await views.facts(source)
        assert views.runner.killed == 1


def _gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (a zombie no one has reaped yet has ended too)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in {"Z", "X"}


async def test_a_decoder_past_its_time_is_killed_with_the_ocr_program_it_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import anyio

    # A "tesseract" that never finishes: the worker waits for it until its time is up.
    programs = tmp_path / "bin"
    programs.mkdir()
    pid_file = tmp_path / "ocr.pid"
    fake = programs / "tesseract"
    fake.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 300\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{programs}:{os.environ['PATH']}")
    async with open_service(Settings(data_dir=tmp_path / "data", view_timeout_seconds=5)) as service:
        artifact = await put(service, media.scanned_pdf(["NEVER READ"]), "stuck.pdf")
        views = MediaViews(service)
        with pytest.raises(ViewTimeout):
            await views.page_ocr(await views.open(CALLER, artifact.id), 1)
    pid = int(pid_file.read_text())
    for _ in range(100):  # SIGKILL is delivered at once; this waits only for the kernel to show it
        if _gone(pid):
            break
        await anyio.sleep(0.05)
    assert _gone(pid), "the OCR program outlived the worker that was killed"


async def test_a_cleanup_run_removes_the_views_of_expired_artifacts(tmp_path: Path) -> None:
    from blobstore.cleanup import run_cleanup
    from blobstore.runtime import cleanup_parts
    from blobstore.views.engine import views_for

    async with open_service(Settings(data_dir=tmp_path)) as service:
        artifact = await service.create_artifact(
            CALLER, _once(media.text_pdf(2)), name="brief.pdf", ttl_seconds=60
        )
        views = views_for(service)
        await views.page_texts(await views.open(CALLER, artifact.id), (2,))
        assert (await service.repo.stats(now=service.clock()))["renditions"] == 2
        expires = artifact.expires_at
        assert expires is not None
        service.clock.source = lambda: expires + timedelta(seconds=1)
        report = await run_cleanup(cleanup_parts(service), grace_seconds=0)
        stats = await service.repo.stats(now=service.clock())
    assert report.step("expire").details["views_removed"] == 2  # the facts (taken at upload) and the page
    assert (stats["renditions"], stats["blobs"]) == (0, 0)


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def test_no_more_decoders_run_at_once_than_the_workers_setting(tmp_path: Path) -> None:
    import anyio

    # A store of its own, so that every page is decoded here rather than found in the media set's cache.
    async with open_service(Settings(data_dir=tmp_path, view_workers=1)) as service:
        artifact = await put(service, media.text_pdf(3), "three.pdf")
        views = MediaViews(service)
        source = await views.open(CALLER, artifact.id)
        most = 0
        done = anyio.Event()

        async def watch() -> None:
            nonlocal most
            while not done.is_set():
                most = max(most, int(views.runner.limiter.borrowed_tokens))
                await anyio.sleep(0.005)

        async with anyio.create_task_group() as group:
            group.start_soon(watch)
            async with anyio.create_task_group() as renders:
                for page in (1, 2, 3):
                    renders.start_soon(views.page_image, source, page, 200)
            done.set()
    assert views.runner.started == 3
    assert most == 1

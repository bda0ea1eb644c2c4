"""The view kinds' one registry: every name in it once, and every view cached under the key, and answered
over HTTP with the ``ETag``, it always had (a changed key silently orphans every cached view, a changed
``ETag`` makes every client fetch again)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from typing import Any

import httpx
import pytest

from blobstore.errors import InvalidRequest
from blobstore.runtime import open_service
from blobstore.views.cache import rendition_key
from blobstore.views.engine import views_for
from blobstore.views.jobs import FACT_JOBS, OPERATIONS
from blobstore.views.kind import arguments_of, choose
from blobstore.views.kinds import KINDS, transcripts
from mcp_resources.reading.views import view_arguments
from mcp_resources.tools.tools import ReadArtifactArgs
from tests.mcp.conftest import CALLER
from tests.views.conftest import MediaSet

OCR = {"engine": "tesseract", "languages": "eng", "min_confidence": 0.9}
TRANSCRIPT = {"engine": "pocketsphinx", "language": "en-us", "most": 600.0}
RENDERER = "4"
"""The renderer version every key holds today; bumping it retires every cached view, so only on purpose (4:
page texts without control characters, OCR read with positions and confidences)."""


def test_every_name_a_kind_declares_is_its_own() -> None:
    def once(names: list[str]) -> None:
        assert [name for name, count in Counter(names).items() if count > 1] == []

    once([kind.name for kind in KINDS])
    once([job.__name__ for kind in KINDS for job in kind.jobs] + [job.__name__ for job in FACT_JOBS])
    assert len(OPERATIONS) == len(FACT_JOBS) + sum(len(kind.jobs) for kind in KINDS)
    once([route.name for kind in KINDS for route in kind.routes])
    once([route.path for kind in KINDS for route in kind.routes])
    once([resource.name for kind in KINDS for resource in kind.resources])
    once([resource.ref for kind in KINDS for resource in kind.resources])
    own = [argument.name for kind in KINDS for argument in kind.arguments]
    once(
        own
        + [name for name in {a.name: a for kind in KINDS for a in kind.shared} if name not in own]
        + list(ReadArtifactArgs.model_fields)
    )
    for kind in KINDS:
        assert kind.selectors
        assert set(kind.selectors) <= {argument.name for argument in kind.arguments}
    assert [kind.name for kind in KINDS if kind.implied] == ["regions"]
    shared = [a for kind in KINDS for a in kind.shared]
    assert all(a == next(b for b in shared if b.name == a.name) for a in shared)
    assert [argument.name for argument in view_arguments()] == [
        "pages",
        "page_format",
        "start_seconds",
        "duration_seconds",
        "frames",
        "frames_layout",
        "frames_mode",
        "region",
        "ocr",
        "transcript",
        "max_edge",
    ]
    # A kind sharing another's argument takes that kind's declaration, the same object.
    own_arguments = {a.name: a for kind in KINDS for a in kind.arguments}
    assert all(own_arguments.get(a.name, a) is a for kind in KINDS for a in kind.shared)


async def test_every_view_is_cached_under_the_key_it_always_had(media_set: MediaSet) -> None:
    async with open_service(media_set.settings) as service:
        views = views_for(service)
        pdf = await views.open(CALLER, media_set.ids["report.pdf"])
        scan = await views.open(CALLER, media_set.ids["scan.pdf"])
        wav = await views.open(CALLER, media_set.ids["pattern.wav"])
        clip = await views.open(CALLER, media_set.ids["short.mp4"])
        picture = await views.open(CALLER, media_set.ids["picture.png"])
        printed = await views.open(CALLER, media_set.ids["printed.png"])
        await views.page_texts(pdf, (2,))
        await views.page_image(pdf, 2, 200)
        await views.page_ocr(scan, 1)
        await views.audio(wav, 1.5, 2.0)
        await views.frames(clip, 2, max_edge=100)
        await views.frames(clip, 2, max_edge=100, layout="sheet")
        await views.image(picture, (0, 0, 10, 10), 50)
        await views.image_ocr(printed, (0, 0, 200, 60))
        await views.scenes(clip, 2, max_edge=100)
        speech = await views.open(CALLER, media_set.ids["speech.wav"])
        await transcripts.transcript(views, speech, 0.0, None)
        spans = [[start, end] for start, end in await views.speech(speech)]
        engine = transcripts.SPEECH_ENGINES["pocketsphinx"].version()
        expected: list[tuple[str, dict[str, Any]]] = [
            (pdf.artifact.sha256, {"op": "facts", "kind": "pdf"}),
            (wav.artifact.sha256, {"op": "facts", "kind": "audio"}),
            (wav.artifact.sha256, {"op": "speech", "vad": "webrtcvad"}),
            (
                speech.artifact.sha256,
                {"op": "transcript", "spans": spans, "engine": engine, "model": "en-us", "language": "en-us"},
            ),
            (clip.artifact.sha256, {"op": "facts", "kind": "video"}),
            (pdf.artifact.sha256, {"op": "page_text", "page": 2}),
            (pdf.artifact.sha256, {"op": "page_png", "page": 2, "max_edge": 200}),
            (scan.artifact.sha256, {"op": "page_ocr", "page": 1, "engine": "tesseract", "languages": "eng"}),
            (wav.artifact.sha256, {"op": "audio", "start": 1.5, "duration": 2.0}),
            *(
                (
                    clip.artifact.sha256,
                    {"op": "frames", "count": 2, "max_edge": 100, "layout": "frames", "index": index},
                )
                for index in (0, 1)
            ),
            (
                clip.artifact.sha256,
                {"op": "frames", "count": 2, "max_edge": 100, "layout": "sheet", "index": 0},
            ),
            (picture.artifact.sha256, {"op": "image", "region": [0, 0, 10, 10], "max_edge": 50}),
            (
                printed.artifact.sha256,
                {"op": "image_ocr", "region": [0, 0, 200, 60], "engine": "tesseract", "languages": "eng"},
            ),
            *(
                (
                    clip.artifact.sha256,
                    {"op": "scenes", "count": 2, "max_edge": 100, "layout": "frames", "index": index},
                )
                for index in ("all", 0)  # the index of how many frames the search found, then its one
            ),
        ]
        missing = [
            params
            for sha256, params in expected
            if await service.repo.get_rendition(rendition_key(sha256, params, RENDERER), now=service.clock())
            is None
        ]
    assert missing == []


async def test_every_route_answers_with_the_etag_it_always_had(views_http: str, media_set: MediaSet) -> None:
    async with open_service(media_set.settings) as service:
        sha = {name: (await service.get_artifact(CALLER, id_)).sha256 for name, id_ in media_set.ids.items()}
    pdf, wav, clip = media_set.ids["report.pdf"], media_set.ids["pattern.wav"], media_set.ids["short.mp4"]
    printed, scan = media_set.ids["printed.png"], media_set.ids["scan.pdf"]
    speech = media_set.ids["speech.wav"]
    routes: list[tuple[str, str, dict[str, Any]]] = [
        (f"/v1/artifacts/{pdf}/pages/3.txt", "report.pdf", {"route": "page.txt", "page": 3}),
        (
            f"/v1/artifacts/{pdf}/pages/3.png?max_edge=120",
            "report.pdf",
            {"route": "page.png", "page": 3, "max_edge": 120},
        ),
        (
            f"/v1/artifacts/{pdf}/pages/3.png",
            "report.pdf",
            {"route": "page.png", "page": 3, "max_edge": None},
        ),
        (
            f"/v1/artifacts/{wav}/audio?start=2&duration=1",
            "pattern.wav",
            {"route": "audio", "start": 2.0, "duration": 1.0},
        ),
        (f"/v1/artifacts/{wav}/audio", "pattern.wav", {"route": "audio", "start": 0.0, "duration": None}),
        # Evenly spaced keyframes keep the ETag they had before frames had modes (the same bytes); a
        # listing's changed, since it names its frames with their mode.
        (
            f"/v1/artifacts/{clip}/frames/1.jpg?count=2&max_edge=90&mode=even",
            "short.mp4",
            {"route": "frame", "index": 1, "count": 2, "max_edge": 90},
        ),
        (
            f"/v1/artifacts/{clip}/frames/0.jpg?count=2&max_edge=90",
            "short.mp4",
            {"route": "frame", "index": 0, "count": 2, "max_edge": 90, "mode": "scenes"},
        ),
        (
            f"/v1/artifacts/{clip}/frames?count=2",
            "short.mp4",
            {
                "route": "frames",
                "count": 2,
                "max_edge": None,
                "base": views_http.rstrip("/"),
                "mode": "scenes",
            },
        ),
        # An OCR view's ETag names the engine, its languages and the threshold the text was marked with.
        (
            f"/v1/artifacts/{printed}/ocr.txt?region=0,0,200,60",
            "printed.png",
            {"route": "ocr.txt", "region": [0, 0, 200, 60], **OCR},
        ),
        (f"/v1/artifacts/{printed}/ocr.json", "printed.png", {"route": "ocr.json", "region": None, **OCR}),
        (f"/v1/artifacts/{scan}/pages/1/ocr.json", "scan.pdf", {"route": "page.ocr.json", "page": 1, **OCR}),
        # A transcript's ETag names the engine, its language and the longest window of this server.
        (
            f"/v1/artifacts/{speech}/transcript.vtt?start=1&duration=20",
            "speech.wav",
            {"route": "transcript.vtt", "start": 1.0, "duration": 20.0, **TRANSCRIPT},
        ),
        (
            f"/v1/artifacts/{speech}/transcript.json",
            "speech.wav",
            {"route": "transcript.json", "start": 0.0, "duration": None, **TRANSCRIPT},
        ),
    ]
    async with httpx.AsyncClient(base_url=views_http, timeout=60) as http:
        for path, name, params in routes:
            response = await http.head(path)
            assert response.status_code == 200, path
            expected = '"view-' + rendition_key(sha[name], params, RENDERER)[:40] + '"'
            assert response.headers["etag"] == expected, path


def test_a_worker_loads_no_library_before_its_job_needs_one() -> None:
    # A worker is a process per job: what importing its registry loads, every first view waits for. The kinds'
    # modules run there too, so they import the store's models, its settings and the decoders' libraries only
    # where a function needs them.
    script = (
        "import sys, blobstore.views.worker, blobstore.views.jobs; "
        "print(' '.join(sorted(name if name.startswith('blobstore') else name.split('.')[0] "
        "for name in sys.modules)))"
    )
    loaded = set(
        subprocess.run(
            [sys.executable, "-c", script], capture_output=True, check=True, text=True
        ).stdout.split()
    )
    heavy = {"blobstore.models", "blobstore.config", "anyio", "pydantic", "sqlalchemy", "mcp", "fastapi"}
    heavy |= {"subprocess", "tempfile"}  # an OCR job starts its program: it imports them then
    libraries = {"PIL", "av", "pypdfium2", "numpy"}
    assert loaded & (heavy | libraries) == set()


def _values(**given: Any) -> dict[str, Any]:
    return {**{argument.name: argument.default for argument in arguments_of(KINDS)}, **given}


def test_a_call_names_one_kind_or_is_refused_saying_why() -> None:
    pages, segments, frames, regions, ocr, _ = KINDS
    assert choose(KINDS, _values(pages="1", page_format="both")) is pages
    # A region beside ocr=true is the part OCR reads: the kind asked for only through it yields.
    assert choose(KINDS, _values(ocr=True, region="0,0,5,5")) is ocr
    assert choose(KINDS, _values(region="0,0,5,5")) is regions
    with pytest.raises(InvalidRequest, match="not pages and OCR"):
        choose(KINDS, _values(pages="1", ocr=True))
    with pytest.raises(InvalidRequest, match='frames_mode="even" applies to frames'):
        choose(KINDS, _values(ocr=True, frames_mode="even"))
    assert choose(KINDS, _values(duration_seconds=5.0)) is segments
    assert choose(KINDS, _values(frames=2, max_edge=300)) is frames
    assert choose(KINDS, _values(max_edge=300)) is regions  # only a shared argument: the implied kind
    with pytest.raises(InvalidRequest, match="not pages and segment"):
        choose(KINDS, _values(pages="1", start_seconds=0.0))
    refusal = 'page_format="image" applies to pages: add pages, e.g. pages="1"'
    with pytest.raises(InvalidRequest, match=re.escape(refusal)):
        choose(KINDS, _values(start_seconds=0.0, page_format="image"))
    with pytest.raises(InvalidRequest, match='frames_layout="sheet" applies to frames'):
        choose(KINDS, _values(region="0,0,5,5", frames_layout="sheet"))


def test_a_kind_asked_only_through_arguments_another_asked_kind_takes_yields_to_it() -> None:
    # A transcript's window is a segment's start and duration: declared once (the same objects), they keep
    # their place; the transcript's own argument follows the others'.
    segments, transcripts = KINDS[1], KINDS[-1]
    assert transcripts.name == "transcripts"
    assert transcripts.shared == segments.arguments
    assert all(a is b for a, b in zip(transcripts.shared, segments.arguments, strict=True))
    names = [argument.name for argument in arguments_of(KINDS)]
    assert names[-2:] == ["transcript", "max_edge"]
    given = {argument.name: argument.default for argument in arguments_of(KINDS)}
    assert choose(KINDS, {**given, "transcript": True, "start_seconds": 12.0}) is transcripts
    assert choose(KINDS, {**given, "transcript": True}) is transcripts
    assert choose(KINDS, {**given, "start_seconds": 12.0}) is segments
    with pytest.raises(InvalidRequest, match="not pages and transcript"):
        choose(KINDS, {**given, "transcript": True, "pages": "1"})

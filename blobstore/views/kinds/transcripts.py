"""What was said, and when, in a recording (audio, or a video's sound): timed text by a speech engine over the
spans of speech the voice-activity detector found, silence skipped.

``read_artifact(uri, transcript=true, start_seconds=?, duration_seconds=?)``; the resource
``…/transcript{?start,duration}``; ``GET /v1/artifacts/{id}/transcript.json``, ``transcript.txt`` and
``transcript.vtt`` (``?start=&duration=``). One call covers at most ``BLOBSTORE_VIEW_MAX_TRANSCRIPT_SECONDS``
of the recording and names the next speech.

The speech in a window is cut into pieces of at most :data:`PIECE_SECONDS` of speech, each transcribed by one
worker job (so a worker's memory holds one piece's samples, and progress is told between pieces) and cached as
a rendition under its spans, the engine, its model and the language.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, NamedTuple, Protocol

from blobstore.errors import InvalidRequest
from blobstore.tokens import estimate_text_tokens
from blobstore.views.describe import next_speech, seconds
from blobstore.views.engines import av, sphinx, whisper
from blobstore.views.kind import (
    DURATION_ARGUMENT,
    START_ARGUMENT,
    Answer,
    Argument,
    Budget,
    Contents,
    Decoded,
    Engine,
    Item,
    Link,
    Listing,
    Payload,
    Resource,
    Route,
    Source,
    Text,
    Values,
    View,
    ViewKind,
)
from blobstore.views.params import parse_window_query
from blobstore.views.plain_text import plain_text
from blobstore.views.progress import report

if TYPE_CHECKING:
    from blobstore.config import Settings
    from blobstore.models import Caller

SOURCES: Final = ("audio", "video")
TRANSCRIPT_TEMPLATE: Final = "blobstore://artifacts/{artifact_id}/transcript{?start,duration}"
SPAN_SECONDS: Final = 30.0
"""A span of speech longer than this is transcribed in parts of this length (an utterance the engine
decodes at once)."""
PIECE_SECONDS: Final = 60.0
"""The most speech one worker job transcribes: its samples, about 2 MB, are all it holds."""
LOW_CONFIDENCE: Final = 0.5
"""A segment whose words' mean confidence (0-1) is under this is marked ``(low confidence)``."""


class Recognizer(Protocol):
    """What a speech engine (:mod:`blobstore.views.engines`) offers: built for a language (None: it detects
    it) from a model (a directory, or None for one it ships), it turns one utterance of 16 kHz mono s16
    samples starting ``offset`` seconds into the recording into a segment ``{start, end, text, confidence,
    words}`` (None when it hears no word), and says the language it heard in."""

    language: str | None

    def transcribe(self, pcm: bytes, offset: float) -> dict[str, Any] | None: ...


SPEECH_ENGINES: Final = {sphinx.NAME: sphinx, whisper.NAME: whisper}
"""The speech engines by name, each a module with ``NAME``, ``version()`` and ``Recognizer(language,
model)``."""


class Setup(NamedTuple):
    """The speech engine this server transcribes with (``BLOBSTORE_TRANSCRIBE_*``)."""

    engine: str
    model: str | None
    """The model directory, for an engine that reads one."""
    language: str | None
    """The language asked for; None: the engine detects it."""

    def key(self) -> dict[str, Any]:
        """What a transcript's cache key names of it: the engine's version, its model, the language."""
        module = SPEECH_ENGINES[self.engine]
        model = whisper.model_id(self.model) if self.engine == whisper.NAME else "en-us"
        return {"engine": module.version(), "model": model, "language": self.language or "detected"}


def setup(views: Engine) -> Setup:
    settings = views.settings
    model = str(settings.transcribe_model) if settings.transcribe_model is not None else None
    if settings.transcribe_engine == whisper.NAME:
        return Setup(whisper.NAME, model, settings.transcribe_language)
    return Setup(sphinx.NAME, None, settings.transcribe_language or sphinx.LANGUAGES[0])


Span = tuple[float, float]


# -- jobs, in the worker ----------------------------------------------------------------------------------


def transcribe_spans(
    path: str, spans: list[list[float]], engine: str, language: str | None, model: str | None = None
) -> Decoded:
    """The segments heard in each of ``spans`` (``[start, end]`` seconds from the file's start), as JSON with
    the language heard: each span's samples decoded after a seek and transcribed as one utterance."""
    recognizer: Recognizer = SPEECH_ENGINES[engine].Recognizer(language, model)
    segments = []
    for start, end in spans:
        pcm = b"".join(av.pcm_pieces(path, start, end - start))
        found = recognizer.transcribe(pcm, start) if pcm else None
        if found is not None:
            found["text"] = plain_text(str(found["text"]))
            segments.append(found)
    meta = {"spans": len(spans), "language": recognizer.language}
    return Decoded(meta=meta, parts=[(meta, json.dumps({"segments": segments}).encode())])


# -- windows and pieces -----------------------------------------------------------------------------------


class Window(NamedTuple):
    """The stretch of a recording one call transcribes, its speech, and where the next speech starts."""

    start: float
    end: float
    total: float
    speech: list[Span]
    following: float | None


def window(speech: Sequence[Span], start: float, duration: float | None, total: float, most: float) -> Window:
    """``[start, start + duration)`` (at most ``most`` seconds, clipped to the recording) and the speech in
    it, each span clipped to it."""
    if not start >= 0:
        raise InvalidRequest("start_seconds must be 0 or more")
    if duration is not None and not duration > 0:
        raise InvalidRequest("duration_seconds must be positive")
    if start >= total:
        raise av.past_the_end(start, total)  # as for a segment: media_invalid
    start = round(start, 3)
    end = round(min(total, start + min(most, duration if duration is not None else most)), 3)
    inside = [(max(a, start), min(b, end)) for a, b in speech if b > start and a < end]
    spoken = [(a, b) for a, b in inside if b - a > 0.05]
    following = next_speech(speech, end) if end < total - 0.0005 else None
    return Window(start, end, total, spoken, following)


def pieces(speech: Sequence[Span]) -> list[list[Span]]:
    """``speech`` cut into utterances of at most :data:`SPAN_SECONDS`, grouped into pieces of at most
    :data:`PIECE_SECONDS` of speech (one worker job each)."""
    parts: list[Span] = []
    for start, end in speech:
        at = start
        while end - at > SPAN_SECONDS:
            parts.append((round(at, 3), round(at + SPAN_SECONDS, 3)))
            at += SPAN_SECONDS
        parts.append((round(at, 3), round(end, 3)))
    grouped: list[list[Span]] = []
    held = 0.0
    for part in parts:
        length = part[1] - part[0]
        if not grouped or held + length > PIECE_SECONDS:
            grouped.append([])
            held = 0.0
        grouped[-1].append(part)
        held += length
    return grouped


# -- views, cached ----------------------------------------------------------------------------------------


class Transcript(NamedTuple):
    engine: str
    language: str
    window: Window
    segments: list[dict[str, Any]]


async def transcript(views: Engine, source: Source, start: float, duration: float | None) -> Transcript:
    """The segments heard in a window of ``source``, piece by piece (each cached), progress told between
    pieces."""
    facts = await views.facts(source)
    speech = await views.speech(source)
    most = views.settings.view_max_transcript_seconds
    found = window(speech, start, duration, float(facts["duration_seconds"]), most)
    engine = setup(views)
    key = engine.key()
    groups = pieces(found.speech)
    spoken = sum(b - a for a, b in found.speech)
    done = 0.0
    segments: list[dict[str, Any]] = []
    heard: list[str] = []
    for group in groups:
        spans = [[a, b] for a, b in group]

        async def compute(spans: list[list[float]] = spans) -> View:
            decoded = await views.decode(
                source,
                "transcribe_spans",
                spans=spans,
                engine=engine.engine,
                language=engine.language,
                model=engine.model,
            )
            meta, data = decoded.parts[0]
            return View(data=data, mime_type="application/json", meta=meta)

        view = await views.one(source, {"op": "transcript", "spans": spans, **key}, compute)
        segments.extend(json.loads(view.data)["segments"])
        if view.meta.get("language") and view.meta["language"] not in heard:
            heard.append(str(view.meta["language"]))
        done += sum(b - a for a, b in group)
        await report(round(done, 3), round(spoken, 3), f"transcribed {done:.0f} of {spoken:.0f} s of speech")
    language = engine.language or ("+".join(heard) if heard else "not detected: no speech")
    return Transcript(str(key["engine"]), language, found, segments)


# -- words ------------------------------------------------------------------------------------------------


def line(segment: Mapping[str, Any]) -> str:
    """``[12.34-15.09] text``, ``(low confidence)`` before a segment under :data:`LOW_CONFIDENCE`."""
    mark = "(low confidence) " if float(segment["confidence"]) < LOW_CONFIDENCE else ""
    return f"[{segment['start']:.2f}-{segment['end']:.2f}] {mark}{segment['text']}"


def text_of(found: Transcript) -> str:
    return "\n".join(line(segment) for segment in found.segments)


def count_line(found: Transcript) -> str:
    """``transcript of 0.0-16.4 s of 16.4 s by pocketsphinx 5.1.1 (en-us): 2 segments, 1 marked (low
    confidence)``."""
    low = sum(1 for segment in found.segments if float(segment["confidence"]) < LOW_CONFIDENCE)
    count = len(found.segments)
    noun = "segment" if count == 1 else "segments"
    where = found.window
    return (
        f"transcript of {seconds(where.start)}-{seconds(where.end)} s of {seconds(where.total)} s by "
        f"{found.engine} ({found.language}): {count} {noun}, {low} marked (low confidence)"
    )


def next_hint(found: Transcript, *, tool_call: bool = True) -> str:
    where = found.window
    if where.end >= where.total - 0.0005:
        return "That transcript reaches the end of the recording."
    if where.following is None:
        return f"No speech follows {seconds(where.end)} s (the voice-activity detector's speech map)."
    if not tool_call:
        return f"Next: start={seconds(where.following)}."
    return f"Next: read_artifact(uri, transcript=true, start_seconds={seconds(where.following)})."


def listing(found: Transcript) -> dict[str, Any]:
    """The transcript as JSON (``transcript.json``): engine, language, the window and the segments with their
    words."""
    where = found.window
    return {
        "engine": found.engine,
        "language": found.language,
        "start_seconds": where.start,
        "end_seconds": where.end,
        "duration_seconds": where.total,
        "min_confidence": LOW_CONFIDENCE,
        "next_speech_seconds": where.following,
        "segments": found.segments,
    }


def _clock(value: float) -> str:
    hours, rest = divmod(round(value * 1000), 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    return f"{hours:02d}:{minutes:02d}:{rest // 1000:02d}.{rest % 1000:03d}"


def webvtt(found: Transcript) -> str:
    """The segments as WebVTT cues (a cue's text escaped as the format asks)."""
    cues = ["WEBVTT", ""]
    for segment in found.segments:
        text = str(segment["text"]).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        cues += [f"{_clock(float(segment['start']))} --> {_clock(float(segment['end']))}", text, ""]
    return "\n".join(cues)


def transcript_uri(artifact_id: str, start: float, duration: float) -> str:
    from blobstore.models import artifact_uri  # here, not in the worker, which never names a URI

    return f"{artifact_uri(artifact_id)}/transcript?start={start:g}&duration={duration:g}"


# -- read_artifact ----------------------------------------------------------------------------------------


async def answer(views: Engine, caller: Caller, artifact_id: str, values: Values, budget: Budget) -> Answer:
    return await _answer(views, caller, artifact_id, values["duration_seconds"], values, budget)


async def segment_text(
    views: Engine, caller: Caller, artifact_id: str, values: Values, budget: Budget
) -> Answer:
    """A segment in text (``include_media=false``): what was said in it, its window the segment's own
    (``duration_seconds`` defaulting to the longest segment)."""
    duration = values["duration_seconds"] or views.max_audio_seconds
    return await _answer(views, caller, artifact_id, duration, values, budget)


async def _answer(
    views: Engine, caller: Caller, artifact_id: str, duration: float | None, values: Values, budget: Budget
) -> Answer:
    source = await views.open(caller, artifact_id, kinds=SOURCES)
    found = await transcript(views, source, values["start_seconds"] or 0.0, duration)
    text = text_of(found)
    tokens = estimate_text_tokens(text)
    name = source.artifact.name
    item: Item
    if not text:
        item = Text("(no speech heard in this stretch)")
    elif budget.take(text.encode("utf-8")):
        item = Text(text)
    else:
        where = found.window
        item = Link(
            transcript_uri(source.artifact.id, where.start, round(where.end - where.start, 3)),
            f"{name} transcript {seconds(where.start)}-{seconds(where.end)} s",
            "text/plain",
            len(text.encode("utf-8")),
            "over this answer's inline budget: read it with resources/read",
        )
        tokens = 0
    head = f"{name}, {count_line(found)}; about {tokens} tokens."
    facts = listing(found)
    facts["segments"] = [
        {key: segment[key] for key in ("start", "end", "text", "confidence")} for segment in found.segments
    ]
    return Answer(head, [item], next_hint(found), {"kind": "transcript", **facts, "estimated_tokens": tokens})


# -- resources --------------------------------------------------------------------------------------------


async def _read(views: Engine, caller: Caller, artifact_id: str, values: Values) -> Contents:
    source = await views.open(caller, artifact_id, kinds=SOURCES)
    found = await transcript(views, source, values["start"], values["duration"])
    meta = listing(found)
    del meta["segments"]
    return Contents("text/plain", text_of(found), None, meta, source)


def _template_words(settings: Settings) -> str:
    return (
        "The transcript of an audio or video artifact's speech, one line per segment '[12.34-15.09] text', "
        "low-confidence segments marked: start and duration in seconds (default 0 and at most "
        f"{settings.view_max_transcript_seconds:g} s)."
    )


# -- HTTP -------------------------------------------------------------------------------------------------


def _etag(route: str) -> Any:
    def etag(values: Values) -> dict[str, Any]:
        return {"route": route, "start": values["start"], "duration": values["duration"]}

    return etag


def _varies(views: Engine) -> dict[str, Any]:
    """A transcript's bytes depend on the engine, its model and language, and the longest window."""
    engine = setup(views)
    varies = {"engine": engine.engine, "language": engine.language}
    if engine.model is not None:
        varies["model"] = engine.model
    return {**varies, "most": views.settings.view_max_transcript_seconds}


def _headers(found: Transcript) -> dict[str, str]:
    where = found.window
    return {
        "x-view-start-seconds": str(where.start),
        "x-view-end-seconds": str(where.end),
        "x-media-duration-seconds": str(where.total),
        "x-transcript-engine": found.engine,
        "x-transcript-language": found.language,
    }


async def _json_payload(views: Engine, source: Source, values: Values) -> Listing:
    return listing(await transcript(views, source, values["start"], values["duration"]))


async def _text_payload(views: Engine, source: Source, values: Values) -> Payload:
    found = await transcript(views, source, values["start"], values["duration"])
    return Payload(text_of(found).encode("utf-8"), "text/plain; charset=utf-8", _headers(found))


async def _vtt_payload(views: Engine, source: Source, values: Values) -> Payload:
    found = await transcript(views, source, values["start"], values["duration"])
    return Payload(webvtt(found).encode("utf-8"), "text/vtt; charset=utf-8", _headers(found))


_WINDOW: Final = (
    Argument("start", float, 0.0, "Start in seconds", {"ge": 0}),
    Argument(
        "duration",
        float | None,
        None,
        "Length in seconds (default and most: the transcript limit)",
        {"gt": 0},
    ),
)


def _route(ext: str, name: str, summary: str, answer: Any, media_type: str | None) -> Route:
    return Route(
        path=f"/transcript.{ext}",
        name=name,
        summary=summary,
        parameters=_WINDOW,
        etag=_etag(f"transcript.{ext}"),
        answer=answer,
        media_type=media_type,
        varies=_varies,
    )


KIND: Final = ViewKind(
    name="transcripts",
    sources=SOURCES,
    arguments=(
        Argument(
            "transcript",
            bool,
            False,
            description="Audio or video: true answers what was said as timed text (one line per segment, "
            "silence skipped, low-confidence segments marked), from start_seconds for at most "
            "duration_seconds.",
        ),
    ),
    selectors=("transcript",),
    noun="transcript",
    example="transcript=true",
    phrase="what a recording says as timed text (transcript, start_seconds, duration_seconds)",
    answer=answer,
    text=answer,
    shared=(START_ARGUMENT, DURATION_ARGUMENT),
    jobs=(transcribe_spans,),
    routes=(
        _route(
            "json",
            "transcript_json",
            "What was said in a recording: segments with times, text, confidence and words",
            _json_payload,
            None,
        ),
        _route(
            "txt",
            "transcript_text",
            "A recording's transcript, one line per segment",
            _text_payload,
            "text/plain",
        ),
        _route("vtt", "transcript_vtt", "A recording's transcript as WebVTT cues", _vtt_payload, "text/vtt"),
    ),
    resources=(
        Resource(
            name="artifact-transcript",
            title="Transcript",
            template=TRANSCRIPT_TEMPLATE,
            mime_type="text/plain",
            description=_template_words,
            ref="transcript",
            path=re.compile(r"transcript"),
            values=parse_window_query,
            read=_read,
        ),
    ),
)

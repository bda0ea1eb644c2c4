"""Segments of audio (or of a video's sound) as 16 kHz mono PCM WAV.

``read_artifact(uri, start_seconds=40, duration_seconds=30)``; the resource ``…/audio{?start,duration}``;
``GET /v1/artifacts/{id}/audio?start=&duration=``.
"""

from __future__ import annotations

import io
import re
import wave
from typing import TYPE_CHECKING, Final

from blobstore.errors import MediaInvalid
from blobstore.tokens import estimate_audio_tokens
from blobstore.views.describe import next_segment_hint, seconds, segment_line
from blobstore.views.engines import av
from blobstore.views.kind import (
    DURATION_ARGUMENT,
    START_ARGUMENT,
    Answer,
    Argument,
    Budget,
    Contents,
    Decoded,
    Engine,
    Inline,
    Item,
    Link,
    Payload,
    Resource,
    Route,
    Source,
    Values,
    View,
    ViewKind,
)
from blobstore.views.kinds import transcripts
from blobstore.views.params import check_segment, parse_window_query

if TYPE_CHECKING:
    from blobstore.config import Settings
    from blobstore.models import Caller

SOURCES: Final = ("audio", "video")
AUDIO_TEMPLATE: Final = "blobstore://artifacts/{artifact_id}/audio{?start,duration}"


def audio_uri(artifact_id: str, start: float, duration: float) -> str:
    from blobstore.models import artifact_uri  # here, not in the worker, which never names a URI

    return f"{artifact_uri(artifact_id)}/audio?start={start:g}&duration={duration:g}"


# -- jobs, in the worker ----------------------------------------------------------------------------------


def audio_segment(path: str, start: float, duration: float) -> Decoded:
    """``[start, start + duration)`` (clipped to the end) as a 16 kHz mono PCM WAV file."""
    samples = av.audio_samples(path, start, duration)
    if not samples.pcm:
        raise MediaInvalid("no samples could be decoded at that time")
    data = io.BytesIO()
    with wave.open(data, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(av.AUDIO_RATE)
        out.writeframes(samples.pcm)
    end = start + len(samples.pcm) / 2 / av.AUDIO_RATE
    meta = {
        "start_seconds": start,
        "end_seconds": round(end, 6),
        "duration_seconds": round(samples.total, 3),
        "sample_rate": av.AUDIO_RATE,
        "channels": 1,
        "decoded_from_seconds": round(samples.decoded_from, 3),
    }
    return Decoded(meta=meta, parts=[(meta, data.getvalue())])


# -- views, cached ----------------------------------------------------------------------------------------


async def audio(views: Engine, source: Source, start: float, duration: float | None = None) -> View:
    """``[start, start + duration)`` as 16 kHz mono PCM WAV; meta gives the exact start, end and total."""
    start, length = check_segment(
        start, views.max_audio_seconds if duration is None else duration, views.max_audio_seconds
    )

    async def compute() -> View:
        decoded = await views.decode(source, "audio_segment", start=start, duration=length)
        meta, data = decoded.parts[0]
        return View(data=data, mime_type="audio/wav", meta=meta)

    return await views.one(source, {"op": "audio", "start": start, "duration": length}, compute)


# -- read_artifact ----------------------------------------------------------------------------------------


async def answer(views: Engine, caller: Caller, artifact_id: str, values: Values, budget: Budget) -> Answer:
    duration: float | None = values["duration_seconds"]
    source = await views.open(caller, artifact_id, kinds=SOURCES)
    view = await audio(views, source, values["start_seconds"] or 0.0, duration)
    meta = view.meta
    end, total = float(meta["end_seconds"]), float(meta["duration_seconds"])
    # To the sample's precision, so that a 30 s segment is 960 tokens rather than 30.000000000000004 s.
    length = round(end - float(meta["start_seconds"]), 6)
    name = source.artifact.name
    head = segment_line(name, float(meta["start_seconds"]), end, total)
    item: Item
    # The estimate is of this answer's blocks, as for pages and frames: a linked segment costs nothing here.
    tokens = 0
    if budget.take(view.data):
        tokens = estimate_audio_tokens(length)
        head += f", 16 kHz mono WAV; about {tokens} tokens."
        item = Inline(view.data, "audio/wav")
    else:
        head += ", 16 kHz mono WAV, over this answer's inline budget: read the link with resources/read."
        item = Link(
            uri=audio_uri(source.artifact.id, float(meta["start_seconds"]), round(length, 3)),
            name=f"{name} {seconds(float(meta['start_seconds']))}-{seconds(end)} s",
            mime_type="audio/wav",
            size=len(view.data),
        )
    speech = (await views.facts(source)).get("speech")
    tail = next_segment_hint(end, total, duration or views.max_audio_seconds, speech)
    return Answer(head, [item], tail, {"kind": "audio", **meta, "estimated_tokens": tokens})


# -- resources --------------------------------------------------------------------------------------------


async def _read(views: Engine, caller: Caller, artifact_id: str, values: Values) -> Contents:
    source = await views.open(caller, artifact_id, kinds=SOURCES)
    view = await audio(views, source, values["start"], values["duration"])
    return Contents("audio/wav", None, view.data, view.meta, source)


def _template_words(settings: Settings) -> str:
    return (
        "A segment of an audio or video artifact as 16 kHz mono PCM WAV: start and duration in seconds "
        f"(default 0 and the longest segment, {settings.view_max_audio_seconds:g} s)."
    )


# -- HTTP -------------------------------------------------------------------------------------------------


async def _payload(views: Engine, source: Source, values: Values) -> Payload:
    view = await audio(views, source, values["start"], values["duration"])
    times = {
        "x-view-start-seconds": str(view.meta["start_seconds"]),
        "x-view-end-seconds": str(view.meta["end_seconds"]),
        "x-media-duration-seconds": str(view.meta["duration_seconds"]),
    }
    return Payload(view.data, view.mime_type, times)


KIND: Final = ViewKind(
    name="segments",
    sources=SOURCES,
    arguments=(START_ARGUMENT, DURATION_ARGUMENT),
    selectors=("start_seconds", "duration_seconds"),
    noun="segment",
    example="start_seconds=0",
    phrase="a segment of audio or video (start_seconds, duration_seconds; 16 kHz mono WAV)",
    answer=answer,
    text=transcripts.segment_text,
    jobs=(audio_segment,),
    routes=(
        Route(
            path="/audio",
            name="audio_segment",
            summary="A segment of audio (or a video's sound) as 16 kHz mono PCM WAV",
            parameters=(
                Argument("start", float, 0.0, "Start in seconds", {"ge": 0}),
                Argument(
                    "duration",
                    float | None,
                    None,
                    "Length in seconds (default and most: the segment limit)",
                    {"gt": 0},
                ),
            ),
            etag=lambda values: {"route": "audio", "start": values["start"], "duration": values["duration"]},
            answer=_payload,
            media_type="audio/wav",
        ),
    ),
    resources=(
        Resource(
            name="artifact-audio",
            title="Audio segment",
            template=AUDIO_TEMPLATE,
            mime_type="audio/wav",
            description=_template_words,
            ref="audio",
            path=re.compile(r"audio"),
            values=parse_window_query,
            read=_read,
        ),
    ),
)

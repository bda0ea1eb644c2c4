"""Transcripts and speech maps, with the real engines (PocketSphinx, WebRTC's voice-activity detector) on real
recordings: Debian's ALSA test voices ("Front Center", "Front Left", ...) with silence between them. Over the
official MCP client on stdio and streamable HTTP in both protocol eras, and over HTTP."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.types import CallToolResult, TextContent, TextResourceContents

from blobstore.config import Settings
from blobstore.errors import BlobstoreError
from blobstore.links import describe, describe_with_view
from blobstore.media import first_view_hint
from blobstore.runtime import open_service
from blobstore.views.engine import published_speech, views_for
from blobstore.views.kinds import transcripts
from blobstore.views.progress import reporting
from tests.mcp.conftest import CALLER, put
from tests.views import media
from tests.views.conftest import SPEECH_GAP, SPEECH_SOUNDS, MediaSet, connect

LINE = re.compile(r"\[(\d+\.\d\d)-(\d+\.\d\d)\] (\(low confidence\) )?(.+)")
SPOKEN = media.spoken_at(SPEECH_SOUNDS, SPEECH_GAP)
"""Where speech.wav's two voices are: about 0.0-1.43 s and 11.43-12.91 s."""


def uri(media_set: MediaSet, name: str) -> str:
    return f"blobstore://artifacts/{media_set.ids[name]}"


def texts(result: CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, TextContent)]


def lines(text: str) -> list[tuple[float, float, bool, str]]:
    found = []
    for line in text.splitlines():
        match = LINE.fullmatch(line)
        assert match is not None, line
        found.append((float(match[1]), float(match[2]), match[3] is not None, match[4]))
    return found


def configure(media_set: MediaSet, monkeypatch: pytest.MonkeyPatch, **changes: Any) -> None:
    monkeypatch.setattr(media_set, "settings", media_set.settings.model_copy(update=changes))


@pytest.mark.parametrize("transport", ["stdio", "stdio-legacy", "http", "http-legacy"])
async def test_a_transcript_says_what_was_said_and_when_engine_and_language_first(
    transport: str, media_set: MediaSet, request: pytest.FixtureRequest
) -> None:
    async with connect(transport, media_set, request) as client:
        result = await client.call_tool(
            "read_artifact", {"uri": uri(media_set, "speech.wav"), "transcript": True}
        )
    assert not result.is_error, result.content
    head, said, tail = texts(result)
    assert head.startswith("speech.wav, transcript of 0.0-12.908 s of 12.908 s by pocketsphinx 5.")
    assert "(en-us): 2 segments, " in head
    (first, second) = lines(said)
    # Each voice's segment lies within where it was put (the silence between is skipped).
    for (start, end, _, _), (begins, ends) in zip((first, second), SPOKEN, strict=True):
        assert begins - 0.05 <= start < end <= ends + 0.05
    assert first[3].split()[-1] == "center"
    assert second[3].split()[-1] == "left"
    assert tail == "That transcript reaches the end of the recording."
    assert isinstance(result.structured_content, dict)
    view = result.structured_content["view"]
    assert (view["kind"], view["language"], view["engine"][:14]) == ("transcript", "en-us", "pocketsphinx 5")
    assert [segment["text"] for segment in view["segments"]] == [first[3], second[3]]
    for segment, (_, _, marked, _) in zip(view["segments"], (first, second), strict=True):
        assert 0 <= segment["confidence"] <= 1
        # A segment under the threshold is marked in the text, and only such a one.
        assert marked == (segment["confidence"] < view["min_confidence"])


@pytest.mark.parametrize("transport", ["memory", "stdio", "http"])
async def test_a_long_recording_is_read_window_by_window_each_naming_the_next_speech(
    transport: str, media_set: MediaSet, request: pytest.FixtureRequest
) -> None:
    speech = uri(media_set, "speech.wav")
    async with connect(transport, media_set, request) as client:
        first = await client.call_tool(
            "read_artifact", {"uri": speech, "transcript": True, "duration_seconds": 5}
        )
        next_call = texts(first)[-1]
        match = re.fullmatch(
            r"Next: read_artifact\(uri, transcript=true, start_seconds=([0-9.]+)\)\.", next_call
        )
        assert match is not None, next_call
        second = await client.call_tool(
            "read_artifact", {"uri": speech, "transcript": True, "start_seconds": float(match[1])}
        )
        # A segment's next call, too, skips the 10 s of silence to where the second voice starts.
        segment = await client.call_tool(
            "read_artifact", {"uri": speech, "start_seconds": 0, "duration_seconds": 4}
        )
    assert texts(first)[0].startswith("speech.wav, transcript of 0.0-5.0 s of 12.908 s")
    ((_, _, _, said),) = lines(texts(first)[1])
    assert said.split()[-1] == "center"
    # The next speech starts in the silence's last half second (the detector pads each span).
    assert SPOKEN[1][0] - 0.5 <= float(match[1]) <= SPOKEN[1][0]
    ((_, _, _, said),) = lines(texts(second)[1])
    assert said.split()[-1] == "left"
    assert texts(second)[-1] == "That transcript reaches the end of the recording."
    rest = 12.908 - float(match[1])  # to the end of the recording: less than the 4 s asked for
    assert (
        texts(segment)[-1]
        == f"Next: read_artifact(uri, start_seconds={match[1]}, duration_seconds={rest:g})."
    )


@pytest.mark.parametrize("transport", ["memory"])
async def test_one_call_covers_at_most_the_configured_seconds(
    transport: str, media_set: MediaSet, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure(media_set, monkeypatch, view_max_transcript_seconds=5.0)
    speech = uri(media_set, "speech.wav")
    async with connect(transport, media_set, request) as client:
        whole = await client.call_tool("read_artifact", {"uri": speech, "transcript": True})
        more = await client.call_tool(
            "read_artifact", {"uri": speech, "transcript": True, "duration_seconds": 60}
        )
        templates = (await client.list_resource_templates()).resource_templates
    for result in (whole, more):
        assert texts(result)[0].startswith("speech.wav, transcript of 0.0-5.0 s of 12.908 s")
        assert texts(result)[-1].startswith("Next: read_artifact(uri, transcript=true, start_seconds=11.")
    (template,) = [t for t in templates if t.name == "artifact-transcript"]
    assert "at most 5 s" in str(template.description)


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_the_transcript_template_is_listed_and_read_and_a_video_without_sound_is_refused(
    transport: str, media_set: MediaSet, request: pytest.FixtureRequest
) -> None:
    wav = media_set.ids["speech.wav"]
    async with connect(transport, media_set, request) as client:
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
        read = (await client.read_resource(f"blobstore://artifacts/{wav}/transcript?start=5")).contents[0]
        silent = await client.call_tool(
            "read_artifact", {"uri": uri(media_set, "clip.mp4"), "transcript": True}
        )
        pdf = await client.call_tool(
            "read_artifact", {"uri": uri(media_set, "report.pdf"), "transcript": True}
        )
        both = await client.call_tool(
            "read_artifact", {"uri": uri(media_set, "speech.wav"), "transcript": True, "pages": "1"}
        )
    assert "blobstore://artifacts/{artifact_id}/transcript{?start,duration}" in templates
    assert isinstance(read, TextResourceContents)
    assert read.mime_type == "text/plain"
    ((start, _, _, said),) = lines(read.text)
    assert start > 10
    assert said.split()[-1] == "left"
    for refused, code in (
        (silent, "unsupported_media"),
        (pdf, "unsupported_media"),
        (both, "invalid_request"),
    ):
        assert refused.is_error
        assert isinstance(refused.structured_content, dict)
        assert refused.structured_content["error"]["code"] == code
    assert "no audio stream" in texts(silent)[0]


async def test_http_answers_json_text_and_webvtt_immutable(views_http: str, media_set: MediaSet) -> None:
    wav = media_set.ids["speech.wav"]
    async with httpx.AsyncClient(base_url=views_http, timeout=120) as http:
        listing = await http.get(f"/v1/artifacts/{wav}/transcript.json")
        text = await http.get(f"/v1/artifacts/{wav}/transcript.txt")
        vtt = await http.get(f"/v1/artifacts/{wav}/transcript.vtt")
        head = await http.head(f"/v1/artifacts/{wav}/transcript.vtt")
        again = await http.get(
            f"/v1/artifacts/{wav}/transcript.vtt", headers={"If-None-Match": vtt.headers["etag"]}
        )
        later = await http.get(f"/v1/artifacts/{wav}/transcript.txt?start=5&duration=100")
        past = await http.get(f"/v1/artifacts/{wav}/transcript.json?start=60")
        pdf = await http.get(f"/v1/artifacts/{media_set.ids['report.pdf']}/transcript.json")
    assert listing.status_code == 200
    found = listing.json()
    assert (found["engine"][:13], found["language"]) == ("pocketsphinx ", "en-us")
    assert [segment["text"].split()[-1] for segment in found["segments"]] == ["center", "left"]
    for segment in found["segments"]:
        assert set(segment) == {"start", "end", "text", "confidence", "words"}
        assert " ".join(word["word"] for word in segment["words"]) == segment["text"]
        assert (
            segment["start"] <= segment["words"][0]["start"] < segment["words"][-1]["end"] <= segment["end"]
        )
    assert text.headers["content-type"] == "text/plain; charset=utf-8"
    assert [said for _, _, _, said in lines(text.text)] == [s["text"] for s in found["segments"]]
    assert "immutable" in vtt.headers["cache-control"]
    assert vtt.headers["content-type"] == "text/vtt; charset=utf-8"
    cues = vtt.text.split("\n\n")
    assert cues[0] == "WEBVTT"
    timing, said = cues[2].strip().split("\n")
    assert re.fullmatch(r"00:00:1\d\.\d{3} --> 00:00:1\d\.\d{3}", timing), timing
    assert said == found["segments"][1]["text"]
    assert (head.status_code, head.content, head.headers["etag"]) == (200, b"", vtt.headers["etag"])
    assert again.status_code == 304
    assert [said for _, _, _, said in lines(later.text)] == [found["segments"][1]["text"]]
    assert later.headers["x-view-end-seconds"] == "12.908"
    assert (past.status_code, past.json()["code"]) == (422, "media_invalid")
    assert past.json()["detail"] == "start 60 s is past the end (12.91 s)"
    assert (pdf.status_code, pdf.json()["code"]) == (415, "unsupported_media")


async def test_the_speech_map_is_in_the_facts_and_the_link_description(media_set: MediaSet) -> None:
    async with open_service(media_set.settings) as service:
        artifact = await service.get_artifact(CALLER, media_set.ids["speech.wav"])
    assert artifact.media is not None
    spans = artifact.media["speech"]
    assert len(spans) == 2
    for (start, end), (begins, ends) in zip(spans, SPOKEN, strict=True):
        assert begins - 0.3 <= start <= begins
        assert ends <= end <= ends + 0.3
    assert "speech 0:00-0:02, 0:11-0:13 of 0:13" in describe(artifact)
    # The link names the transcript first, the sound as its evidence.
    assert describe_with_view(artifact).endswith(
        "; read what is said with read_artifact(uri, transcript=true); hear the first 12.908 s with "
        "read_artifact(uri, start_seconds=0, duration_seconds=12.908)"
    )


def test_a_long_meetings_map_joins_its_closest_spans_to_stay_short() -> None:
    spans = [(10.0 * i, 10.0 * i + 4) for i in range(100)] + [(2000.0, 2001.0)]
    joined = published_speech(spans, 2100.0)
    assert len(joined) <= 20
    assert joined[0][0] == 0.0
    assert joined[-1] == [2000.0, 2001.0]  # the far span stays apart


def test_speech_is_cut_into_pieces_of_at_most_a_minute_and_utterances_of_at_most_30_s() -> None:
    pieces = transcripts.pieces([(0.0, 75.0), (80.0, 82.0)])
    assert pieces == [[(0.0, 30.0), (30.0, 60.0)], [(60.0, 75.0), (80.0, 82.0)]]
    window = transcripts.window([(0.0, 2.0), (11.0, 13.0), (20.0, 21.0)], 1.0, None, 25.0, 12.0)
    assert (window.start, window.end, window.speech, window.following) == (
        1.0,
        13.0,
        [(1.0, 2.0), (11.0, 13.0)],
        20.0,
    )


async def test_progress_is_told_between_pieces(media_set: MediaSet, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transcripts, "PIECE_SECONDS", 1.0)  # each voice a piece of its own
    told: list[tuple[float, float | None, str | None]] = []

    async def reporter(done: float, total: float | None, message: str | None) -> None:
        told.append((done, total, message))

    wav = media.spoken_wav(["Rear_Right", "Front_Left"], gap=3.0)
    async with open_service(media_set.settings) as service:
        views = views_for(service)
        source = await views.open(CALLER, (await put(service, wav, "progress.wav")).id)
        with reporting(reporter):
            found = await transcripts.transcript(views, source, 0.0, None)
    assert [segment["text"].split()[-1] for segment in found.segments] == ["right", "left"]
    assert len(told) == 2
    (first, total, message), (done, again, _) = told
    assert total is not None
    assert 0 < first < total == again == done
    assert message == f"transcribed {first:.0f} of {total:.0f} s of speech"


async def _transcript_or_error(settings: Settings, name: str, data: bytes) -> tuple[dict[str, Any], Any]:
    async with open_service(settings) as service:
        views = views_for(service)
        artifact = await put(service, data, name)
        source = await views.open(CALLER, artifact.id)
        try:
            found: Any = await transcripts.transcript(views, source, 0.0, None)
        except BlobstoreError as exc:
            found = exc
        return artifact.media or {}, found


async def test_hostile_recordings_are_bounded_and_answered_never_internal(tmp_path: Path) -> None:
    # The decoder workers' smallest address space: ten hours of samples (1.1 GB) would not fit in it.
    settings = Settings(data_dir=tmp_path / "data", view_memory_bytes=256 * 1024 * 1024)
    ten_hours = media.silent_flac(36_000.0)
    assert len(ten_hours) < 8 * 1024 * 1024
    facts, silence = await _transcript_or_error(settings, "silence.flac", ten_hours)
    assert facts["speech"] == []
    assert first_view_hint("audio/flac", facts) == (  # no transcript offered where no speech was found
        "hear the first 30 s with read_artifact(uri, start_seconds=0, duration_seconds=30)"
    )
    assert silence.segments == []
    assert (silence.window.start, silence.window.end) == (0.0, 600.0)
    assert (
        transcripts.next_hint(silence)
        == "No speech follows 600.0 s (the voice-activity detector's speech map)."
    )
    # A 1 s MP3 whose header claims ten hours is one second long, its speech map and transcript too.
    facts, claims = await _transcript_or_error(settings, "claims.mp3", media.claiming_mp3(1.0, 36_000.0))
    assert facts["duration_seconds"] < 1.2
    assert claims.window.end == facts["duration_seconds"]
    # 64 channels FFmpeg has no layout to mix down from: media_invalid, as for its segments, with no map.
    facts, many = await _transcript_or_error(settings, "many.wav", media.many_channels_wav(64))
    assert facts["channels"] == 64
    assert "speech" not in facts
    assert isinstance(many, BlobstoreError)
    assert many.code == "media_invalid"
    # A speech MP3 cut short: what decodes is transcribed.
    mp3 = media.as_mp3(media.spoken_wav(["Front_Center", "Rear_Right"], gap=2.0))
    facts, cut = await _transcript_or_error(settings, "cut.mp3", mp3[: len(mp3) * 3 // 4])
    assert not isinstance(cut, BlobstoreError), cut
    assert [segment["text"].split()[-1] for segment in cut.segments][:1] == ["center"]

"""PyAV (FFmpeg): the facts of audio and video streams, audio decoded to 16 kHz mono PCM after a seek, and a
video's keyframes as pictures.

Time counts from the file's own start (:func:`origin`), so a segment after a seek starts where one decoded
from the beginning would have it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final, NamedTuple

from blobstore.errors import MediaInvalid, UnsupportedMedia
from blobstore.media_length import measured_duration
from blobstore.views.progress import step

AUDIO_RATE: Final = 16_000
"""Audio views are 16 kHz mono PCM: enough for speech, a quarter of CD audio's samples."""


@contextmanager
def open_media(path: str) -> Iterator[Any]:
    """The container at ``path`` (``media_invalid`` when FFmpeg cannot open it), closed after the block."""
    import av

    av.logging.set_level(av.logging.PANIC)
    try:
        container = av.open(path, metadata_errors="ignore")
    except (av.FFmpegError, UnicodeDecodeError):
        raise MediaInvalid("the file could not be opened as audio or video") from None
    with container:
        yield container


def duration(container: Any, stream: Any) -> float:
    if stream.duration is not None and stream.time_base is not None:
        return float(stream.duration * stream.time_base)
    if container.duration is not None:
        return float(container.duration) / 1_000_000
    raise MediaInvalid("the file does not say how long it is")


def origin(container: Any) -> float:
    """Where the file's own clock starts, in seconds: views count time from there. FFmpeg's timestamps
    start at the container's start time, not at 0: an MP3's first sample is at its encoder delay (about
    25 ms), an MPEG-TS recording's at whatever its broadcast clock said. So a segment after a seek starts
    where one decoded from the beginning would have it, and a keyframe at 3 s is 3 s into the video."""
    return container.start_time / 1_000_000 if container.start_time else 0.0


def _check_decodes(container: Any, stream: Any) -> None:
    """Decode the first packets: a header that opens but lies about what follows fails here, not later."""
    import av

    try:
        for frame in container.decode(stream):
            if frame.samples:
                return
    except av.FFmpegError:
        raise MediaInvalid("the stream's first packets could not be decoded") from None
    raise MediaInvalid("the stream holds no decodable samples")


def audio_facts(path: str) -> dict[str, Any]:
    """Duration, sample rate, channels and codec of the first audio stream, once its first packets decode."""
    with open_media(path) as container:
        if not container.streams.audio:
            raise UnsupportedMedia("the file has no audio stream")
        stream = container.streams.audio[0]
        claimed = duration(container, stream)
        meta = {
            "duration_seconds": round(claimed, 3),
            "sample_rate": int(stream.rate or stream.codec_context.sample_rate or 0),
            "channels": int(stream.codec_context.channels or 0),
            "codec": str(stream.codec_context.name),
        }
        _check_decodes(container, stream)
        meta["duration_seconds"] = round(measured_duration(container, stream, claimed), 3)
        return meta


def video_facts(path: str) -> dict[str, Any]:
    """Duration, size, frame rate and codec of the first video stream, and whether there is sound."""
    with open_media(path) as container:
        if not container.streams.video:
            raise UnsupportedMedia("the file has no video stream")
        stream = container.streams.video[0]
        rate = stream.average_rate or stream.guessed_rate
        return {
            "duration_seconds": round(duration(container, stream), 3),
            "width": int(stream.codec_context.width),
            "height": int(stream.codec_context.height),
            "frame_rate": round(float(rate), 3) if rate else None,
            "codec": str(stream.codec_context.name),
            "has_audio": bool(container.streams.audio),
        }


def video_probe(path: str) -> dict[str, Any]:
    """:func:`video_facts`, after decoding the first frame: a header that opens but whose pictures do not
    decode fails here (a typed video argument is checked before its tool runs)."""
    import av

    facts = video_facts(path)
    with open_media(path) as container:
        stream = container.streams.video[0]
        try:
            frame = next(container.decode(stream), None)
        except av.FFmpegError:
            raise MediaInvalid("the video's first frame could not be decoded") from None
        if frame is None:
            raise MediaInvalid("the video holds no decodable frame")
    return facts


class Samples(NamedTuple):
    """16 kHz mono s16 samples of a segment, the recording's length, and where decoding began."""

    pcm: bytes
    total: float
    decoded_from: float


def _segment_samples(container: Any, stream: Any, start: float, seconds: float) -> tuple[bytes, float]:
    """16 kHz mono s16 samples of ``[start, start + seconds)``: a seek to the packet before ``start``,
    then decoding only until the segment is full. Also the time decoding began at (the seek's landing)."""
    import av

    resampler = av.AudioResampler(format="s16", layout="mono", rate=AUDIO_RATE)
    wanted = round(seconds * AUDIO_RATE)
    out = bytearray()
    skip: int | None = None
    first = 0.0
    begins = origin(container)
    if start > 0:
        target = int((start + begins) / stream.time_base)
        try:
            container.seek(target, stream=stream, backward=True, any_frame=False)
        except av.FFmpegError:  # a seek table pointing past the end of a file cut short: from the start
            container.seek(0, stream=stream, backward=True, any_frame=False)
    try:
        for frame in container.decode(stream):
            if skip is None:
                first = float(frame.time) - begins if frame.time is not None else 0.0
                skip = max(0, round((start - first) * AUDIO_RATE))
            for piece in resampler.resample(frame):
                out += bytes(piece.planes[0])[: piece.samples * 2]
            done = min(seconds, max(0, len(out) // 2 - skip) / AUDIO_RATE)
            step(round(done, 3), seconds, f"{done:.1f} s of {seconds:g} s of audio decoded")
            if len(out) >= 2 * (skip + wanted):
                break
        else:
            for piece in resampler.resample(None):
                out += bytes(piece.planes[0])[: piece.samples * 2]
    except av.FFmpegError:
        if not out:
            raise MediaInvalid("the audio could not be decoded at that time") from None
        # A packet cut short or damaged ends the stream: the segment is what decoded before it.
    begin = 2 * (skip or 0)
    return bytes(out[begin : begin + 2 * wanted]), first


def past_the_end(start: float, total: float) -> MediaInvalid:
    return MediaInvalid(f"start {start:g} s is past the end ({round(total, 2):g} s)")


def audio_samples(path: str, start: float, length: float) -> Samples:
    """``[start, start + length)`` of the first audio stream (clipped to its end) as 16 kHz mono PCM;
    ``media_invalid`` for a start past the end. The end is what decodes where the header claims more
    (:func:`~blobstore.media_length.measured_duration`)."""
    with open_media(path) as container:
        if not container.streams.audio:
            raise UnsupportedMedia("the file has no audio stream")
        stream = container.streams.audio[0]
        stream.thread_type = "AUTO"
        total = duration(container, stream)
        if start >= total:  # past what the header claims: the stream may say otherwise
            total = measured_duration(container, stream, total)
        if start >= total:
            raise past_the_end(start, total)
        pcm, decoded_from = _segment_samples(container, stream, start, min(length, total - start))
        total = measured_duration(container, stream, total)
    if not pcm and start >= total:
        raise past_the_end(start, total)
    return Samples(pcm, total, decoded_from)


def keyframes(path: str, count: int) -> Iterator[tuple[float, Any]]:
    """The keyframe at or before each of ``count`` evenly spaced times (the middle of each equal slice), with
    its time, as a PIL image."""
    import av

    with open_media(path) as container:
        if not container.streams.video:
            raise UnsupportedMedia("the file has no video stream")
        stream = container.streams.video[0]
        total = duration(container, stream)
        begins = origin(container)
        for i in range(count):
            target = total * (i + 0.5) / count
            container.seek(
                int((target + begins) / stream.time_base), stream=stream, backward=True, any_frame=False
            )
            try:
                frame = next(container.decode(stream), None)
            except av.FFmpegError:
                raise MediaInvalid("a keyframe could not be decoded") from None
            if frame is None:
                raise MediaInvalid("no frame could be decoded near that time")
            yield max(0.0, float(frame.time or 0.0) - begins), frame.to_image()


def every_frame(path: str) -> Iterator[tuple[float, Any]]:
    """Every decoded frame of the first video stream in order, with its time (from the file's start), as
    PyAV frames (:func:`thumbnail` and :func:`picture` read them). Decoding stops at the first packet FFmpeg
    cannot decode: the frames before it are the video."""
    import av

    with open_media(path) as container:
        if not container.streams.video:
            raise UnsupportedMedia("the file has no video stream")
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        begins = origin(container)
        try:
            for frame in container.decode(stream):
                if frame.time is not None:
                    yield max(0.0, float(frame.time) - begins), frame
        except av.FFmpegError:
            return


def keyframes_near(path: str, times: list[float]) -> Iterator[tuple[float, Any]]:
    """The keyframe at or before each of ``times`` (seconds from the file's start), each keyframe once, as
    PyAV frames with their times: a seek and one decoded frame per time, however long the video."""
    import av

    with open_media(path) as container:
        if not container.streams.video:
            raise UnsupportedMedia("the file has no video stream")
        stream = container.streams.video[0]
        begins = origin(container)
        seen: set[float] = set()
        for target in times:
            container.seek(
                int((target + begins) / stream.time_base), stream=stream, backward=True, any_frame=False
            )
            try:
                frame = next(container.decode(stream), None)
            except av.FFmpegError:
                continue
            if frame is None or frame.time is None:
                continue
            time = max(0.0, float(frame.time) - begins)
            if time not in seen:
                seen.add(time)
                yield time, frame


class Thumbnails:
    """Frames scaled to ``width`` pixels wide (their aspect kept) as RGB uint8 arrays (numpy), through one
    scaler kept from frame to frame: a scaler set up per frame costs more than the scaling."""

    def __init__(self, width: int) -> None:
        from av.video.reformatter import VideoReformatter

        self.width = width
        self._scaler = VideoReformatter()

    def __call__(self, frame: Any) -> Any:
        height = max(1, round(self.width * frame.height / max(1, frame.width)))
        small = self._scaler.reformat(frame, width=self.width, height=height, format="rgb24")
        return small.to_ndarray()


def picture(frame: Any) -> Any:
    """``frame`` as a PIL image."""
    return frame.to_image()


def pcm_pieces(path: str, start: float = 0.0, length: float | None = None) -> Iterator[bytes]:
    """``[start, start + length)`` of the first audio stream (to its end without ``length``) as 16 kHz mono
    s16 PCM, piece by piece as it decodes: memory stays flat however long the recording. A packet FFmpeg
    cannot decode ends the stream, as for a segment; ``media_invalid`` when nothing decodes at all."""
    import av

    with open_media(path) as container:
        if not container.streams.audio:
            raise UnsupportedMedia("the file has no audio stream")
        stream = container.streams.audio[0]
        try:
            resampler = av.AudioResampler(format="s16", layout="mono", rate=AUDIO_RATE)
        except (av.FFmpegError, ValueError):
            raise MediaInvalid("the audio could not be resampled") from None
        begins = origin(container)
        if start > 0:
            try:
                container.seek(
                    int((start + begins) / stream.time_base), stream=stream, backward=True, any_frame=False
                )
            except av.FFmpegError:
                container.seek(0, stream=stream, backward=True, any_frame=False)
        left = None if length is None else round(length * AUDIO_RATE) * 2
        skip: int | None = None
        given = 0
        try:
            for frame in container.decode(stream):
                if skip is None:
                    first = float(frame.time) - begins if frame.time is not None else 0.0
                    skip = max(0, round((start - first) * AUDIO_RATE)) * 2
                for piece in resampler.resample(frame):
                    data = bytes(piece.planes[0])[: piece.samples * 2]
                    if skip:
                        cut = min(skip, len(data))
                        data, skip = data[cut:], skip - cut
                    if left is not None:
                        data = data[:left]
                        left -= len(data)
                    if data:
                        given += len(data)
                        yield data
                if left == 0:
                    return
        except (av.FFmpegError, ValueError):
            if not given:
                raise MediaInvalid("the audio could not be decoded") from None

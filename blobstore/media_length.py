"""How long an audio stream is, as its decoder finds it rather than as its header claims.

A container's duration is a claim: an MP3's Xing or LAME tag counts frames, FLAC's STREAMINFO counts samples,
and neither changes when the file is cut short, so the first quarter of a 3 s MP3 still claims 3 s while
0.73 s of it decodes. Decoding a whole file to measure it would cost a two-hour recording seconds of CPU at
every upload, so :func:`measured_duration` checks the claim where it can be checked cheaply:

1. it seeks to :data:`TAIL_SECONDS` before the claimed end and reads the packets from there to the end of the
   file, without decoding them;
2. when nothing is there (the seek landed past the end of a file cut short), it reads every packet from the
   start instead: demuxing only finds packet boundaries and timestamps, a small fraction of decoding's cost;
3. it decodes the last :data:`TAIL_SECONDS` of packets it found, and the end of the last frame that decodes is
   where the stream ends.

When that end and the claim agree within :data:`AGREE_SECONDS` (a frame, give or take the encoder's padding),
the claim stands; otherwise the measured end does. A header that claims ten hours over a 1 s file costs one
seek that finds nothing and a second of packets.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Final

TAIL_SECONDS: Final = 2.0
"""How much of the stream's end is decoded to find where it ends."""
AGREE_SECONDS: Final = 0.05
"""A header and a stream whose ends are this close agree (an MP3 frame is 26 ms, an Opus pre-skip 6.5 ms)."""
MAX_TAIL_PACKETS: Final = 4096
"""The most packets kept for decoding, whatever their timestamps say."""


def measured_duration(container: Any, stream: Any, claimed: float) -> float:
    """The duration of ``stream`` (an audio stream of the open PyAV ``container``) in seconds from the file's
    own start: ``claimed`` (what the container says) when the stream's end bears it out, else the end of the
    last frame that decodes; ``claimed`` when nothing could be measured. It seeks and decodes: call it when
    the caller has read what it needs of the container."""
    import av

    try:
        end = _stream_end(container, stream, claimed)
    except av.FFmpegError:
        return claimed
    if end is None or abs(end - claimed) <= AGREE_SECONDS:
        return claimed
    return end


def _origin(container: Any) -> float:
    """Where the file's clock starts: times count from there (see ``blobstore.views.engines.av.origin``)."""
    return container.start_time / 1_000_000 if container.start_time else 0.0


def _stream_end(container: Any, stream: Any, claimed: float) -> float | None:
    origin = _origin(container)
    tail = _tail_packets(container, stream, max(0.0, claimed - TAIL_SECONDS), origin)
    if not tail:
        tail = _tail_packets(container, stream, 0.0, origin)
    return _decoded_end(stream, tail, origin)


def _tail_packets(container: Any, stream: Any, start: float, origin: float) -> deque[Any]:
    """The packets of the last :data:`TAIL_SECONDS` of the stream, read (not decoded) from a seek to the
    packet at or before ``start`` to the end of the file; none when the seek or the reading finds none."""
    import av

    tail: deque[Any] = deque(maxlen=MAX_TAIL_PACKETS)
    try:
        target = int((start + origin) / stream.time_base)
        container.seek(target, stream=stream, backward=True, any_frame=False)
        for packet in container.demux(stream):
            if packet.size == 0:
                continue
            tail.append(packet)
            newest = packet.pts if packet.pts is not None else packet.dts
            if newest is None:
                continue
            horizon = newest * stream.time_base - TAIL_SECONDS
            while len(tail) > 1 and _time(tail[0], stream) is not None and _time(tail[0], stream) < horizon:
                tail.popleft()
    except av.FFmpegError:
        pass  # a seek past the end of a file cut short, or a damaged packet: what was read stands
    return tail


def _time(packet: Any, stream: Any) -> float | None:
    ts = packet.pts if packet.pts is not None else packet.dts
    return None if ts is None else float(ts * stream.time_base)


def _decoded_end(stream: Any, packets: deque[Any], origin: float) -> float | None:
    """The end, in seconds from the file's start, of the last frame that ``packets`` decode to."""
    import av

    stream.codec_context.flush_buffers()
    end: float | None = None
    for packet in [*packets, None]:
        try:
            frames = stream.decode(packet)
        except av.FFmpegError:
            continue  # a packet cut short or damaged decodes to nothing: the stream ends before it
        for frame in frames:
            # A frame a decoding thread hands back at the flush has lost its time base: it is the stream's.
            time_base = frame.time_base or stream.time_base
            if frame.samples and frame.pts is not None and time_base and frame.sample_rate:
                frame_end = float(frame.pts * time_base) - origin + frame.samples / frame.sample_rate
                end = frame_end if end is None else max(end, frame_end)
    return end

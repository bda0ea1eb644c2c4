"""WebRTC's voice-activity detector (``webrtcvad-wheels``, MIT): where speech is in 16 kHz mono PCM.

It judges 30 ms frames one by one (a few microseconds each: an hour of audio in about a second with its
decoding), so a recording's speech map is one pass over its samples with nothing kept but the spans. Runs of
speech frames closer than :data:`JOIN_SECONDS` are one span, runs shorter than :data:`MIN_SPEECH_SECONDS`
(a click, a cough) are none, and each span is widened by :data:`PAD_SECONDS` so a word's soft start and end
are inside it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

NAME: Final = "webrtcvad"
RATE: Final = 16_000
FRAME_SECONDS: Final = 0.03
AGGRESSIVENESS: Final = 2
"""0-3: how readily a frame is called not speech; 2 keeps the ALSA test voices whole."""
JOIN_SECONDS: Final = 0.5
MIN_SPEECH_SECONDS: Final = 0.12
PAD_SECONDS: Final = 0.15

Span = tuple[float, float]


def speech_spans(pieces: Iterable[bytes]) -> tuple[list[Span], float]:
    """The spans of speech (start, end in seconds from the first sample) in 16 kHz mono s16 PCM given piece by
    piece, and the length of the PCM in seconds."""
    import webrtcvad

    detector = webrtcvad.Vad(AGGRESSIVENESS)
    frame = round(RATE * FRAME_SECONDS) * 2
    runs: list[list[int]] = []
    index = 0
    held = bytearray()
    for piece in pieces:
        held += piece
        whole = len(held) - len(held) % frame
        view = memoryview(held)
        for at in range(0, whole, frame):
            if detector.is_speech(bytes(view[at : at + frame]), RATE):
                if runs and runs[-1][1] == index:
                    runs[-1][1] = index + 1
                else:
                    runs.append([index, index + 1])
            index += 1
        view.release()
        del held[:whole]
    total = (index * frame + len(held)) / 2 / RATE
    return join(
        [(a * FRAME_SECONDS, b * FRAME_SECONDS) for a, b in runs],
        total,
        gap=JOIN_SECONDS,
        shortest=MIN_SPEECH_SECONDS,
        pad=PAD_SECONDS,
    ), total


def join(
    spans: list[Span], total: float, *, gap: float, shortest: float = 0.0, pad: float = 0.0
) -> list[Span]:
    """``spans`` with those closer than ``gap`` made one, then those shorter than ``shortest`` dropped, then
    each widened by ``pad`` (within ``[0, total]``), to the millisecond."""
    joined: list[list[float]] = []
    for start, end in spans:
        if joined and start - joined[-1][1] < gap:
            joined[-1][1] = end
        else:
            joined.append([start, end])
    return [
        (round(max(0.0, start - pad), 3), round(min(total, end + pad), 3))
        for start, end in joined
        if end - start >= shortest
    ]

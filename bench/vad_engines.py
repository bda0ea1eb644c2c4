"""Which voice-activity detector finds speech better, and at what cost: WebRTC's (``webrtcvad-wheels``, the
store's) against Silero VAD's ONNX model on onnxruntime (the copy faster-whisper ships; run where the
``whisper`` extra is installed).

Standalone. On recordings made of Debian's ALSA test voices (alsa-utils) and of what is not speech, it
reports for each detector:

- speech found: the share of the voices' time (each voice from its first to its last sample above -40 dBFS)
  inside the spans the detector found, and the spans' time outside any voice (seconds), on the eight voices
  with 3 s of silence between them;
- what is not speech called speech: seconds of a 60 s 440 Hz tone, and of the ALSA ``Noise.wav`` repeated to
  60 s, inside its spans;
- seconds to map an hour of audio (the voices recording looped to ``--minutes``, scaled to an hour).

Both read 16 kHz mono samples decoded by FFmpeg (PyAV) and join spans closer than 0.5 s, as the store does.

    .venv/bin/python bench/vad_engines.py               # ten minutes of audio for the speed row
"""

from __future__ import annotations

import argparse
import json
import math
import time
import wave
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from blobstore.views.engines import vad

ALSA = Path("/usr/share/sounds/alsa")
VOICES = (
    *("Front_Center", "Front_Left", "Front_Right"),
    *("Rear_Center", "Rear_Left", "Rear_Right"),
    *("Side_Left", "Side_Right"),
)
GAP = 3.0
RATE = 16_000
Spans = list[tuple[float, float]]


def voice(name: str) -> np.ndarray:
    """An ALSA sound at 16 kHz (every third sample of its 48 kHz: it is band-limited speech)."""
    with wave.open(str(ALSA / f"{name}.wav"), "rb") as wav:
        samples = np.frombuffer(wav.readframes(wav.getnframes()), dtype=np.int16)
    return samples[::3].copy()


def voices() -> tuple[np.ndarray, Spans]:
    """The eight voices, :data:`GAP` seconds apart, and where each one's sound is (above -40 dBFS)."""
    parts: list[np.ndarray] = []
    truth: Spans = []
    at = 0
    for name in VOICES:
        sound = voice(name)
        loud = np.flatnonzero(np.abs(sound.astype(np.int32)) > 328)
        truth.append(((at + loud[0]) / RATE, (at + loud[-1]) / RATE))
        parts += [sound, np.zeros(round(GAP * RATE), dtype=np.int16)]
        at += len(sound) + round(GAP * RATE)
    return np.concatenate(parts), truth


def tone(seconds: float) -> np.ndarray:
    t = np.arange(round(seconds * RATE)) / RATE
    return (8000 * np.sin(2 * math.pi * 440 * t)).astype(np.int16)


def noise(seconds: float) -> np.ndarray:
    sound = voice("Noise")
    return np.tile(sound, math.ceil(seconds * RATE / len(sound)))[: round(seconds * RATE)]


def webrtc(samples: np.ndarray) -> Spans:
    pcm = samples.tobytes()
    spans, _ = vad.speech_spans(pcm[i : i + 65536] for i in range(0, len(pcm), 65536))
    return spans


def silero(samples: np.ndarray) -> Spans:
    from faster_whisper.vad import VadOptions, get_speech_timestamps

    options = VadOptions(min_silence_duration_ms=500, speech_pad_ms=150, min_speech_duration_ms=120)
    found = get_speech_timestamps(samples.astype(np.float32) / 32768.0, options)
    return [(chunk["start"] / RATE, chunk["end"] / RATE) for chunk in found]


def overlap(spans: Spans, truth: Spans) -> float:
    return sum(max(0.0, min(b, d) - max(a, c)) for a, b in spans for c, d in truth)


def measure(detect: Callable[[np.ndarray], Spans], minutes: float) -> dict[str, Any]:
    recording, truth = voices()
    found = detect(recording)
    spoken = sum(b - a for a, b in truth)
    inside = overlap(found, truth)
    long = np.tile(recording, math.ceil(minutes * 60 * RATE / len(recording)))
    started = time.perf_counter()
    detect(long)
    seconds = time.perf_counter() - started
    return {
        "spans_found": len(found),
        "voices": len(truth),
        "speech_found": round(inside / spoken, 3),
        "outside_voices_seconds": round(sum(b - a for a, b in found) - inside, 2),
        "tone_60s_called_speech_seconds": round(sum(b - a for a, b in detect(tone(60))), 2),
        "noise_60s_called_speech_seconds": round(sum(b - a for a, b in detect(noise(60))), 2),
        "seconds_per_hour": round(seconds * 3600 / (len(long) / RATE), 2),
    }


def main(minutes: float) -> None:
    report: dict[str, Any] = {"webrtcvad": measure(webrtc, minutes)}
    try:
        import faster_whisper  # noqa: F401
    except ImportError:
        report["silero"] = "not measured: faster-whisper (the whisper extra) is not installed"
    else:
        report["silero"] = measure(silero, minutes)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=10.0, help="audio mapped for the speed row")
    main(parser.parse_args().minutes)

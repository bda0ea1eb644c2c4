"""What measuring an audio file's duration costs (``blobstore.media_length``), against decoding it all.

Standalone. Encodes a recording of ``--hours`` (16 kHz mono MP3, FFmpeg's LAME through PyAV), cuts copies of
it short, and patches a 1 s MP3's ``Info`` tag to claim ten hours; then reports for each the duration its
header claims, the one measured, and the wall time of opening the file and measuring it (median of
``--runs``), and once, for the whole recording, the wall time of demuxing every packet and of decoding every
frame (what measuring by decoding it all would cost).

    .venv/bin/python bench/media_length.py               # a two-hour recording
    .venv/bin/python bench/media_length.py --hours 0.1   # a quick one
"""

from __future__ import annotations

import argparse
import math
import statistics
import struct
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import av

from blobstore.media_length import measured_duration

RATE = 16_000
FRAME = 1152
"""Samples handed to the encoder at a time."""
MP3_FRAME = 576
"""Samples in one MP3 frame at 16 kHz (MPEG-2 layer III), what the ``Info`` tag counts."""


def write_mp3(path: Path, seconds: float) -> None:
    """``seconds`` of a 440 Hz tone, 16 kHz mono, as MP3."""
    period = [round(8000 * math.sin(2 * math.pi * 440 * i / RATE)) for i in range(RATE)]
    second = struct.pack(f"<{RATE}h", *period)
    total = round(seconds * RATE)
    with av.open(str(path), "w", format="mp3") as container:
        stream = container.add_stream("libmp3lame", rate=RATE, layout="mono")
        assert isinstance(stream, av.AudioStream)
        stream.format = "s16p"
        for start in range(0, total, FRAME):
            count = min(FRAME, total - start)
            offset = 2 * (start % RATE)
            frame = av.AudioFrame(format="s16p", layout="mono", samples=count)
            frame.planes[0].update((second + second)[offset : offset + 2 * count])
            frame.rate = RATE
            frame.pts = start
            frame.time_base = Fraction(1, RATE)
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)


def claim(path: Path, seconds: float) -> None:
    """Make the LAME ``Info`` tag of ``path`` count the frames of ``seconds``."""
    data = bytearray(path.read_bytes())
    tag = data.find(b"Info")
    struct.pack_into(">I", data, tag + 8, round(seconds * RATE / MP3_FRAME))
    path.write_bytes(bytes(data))


def measure(path: Path) -> tuple[float, float]:
    """(claimed, measured) seconds of ``path``."""
    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        claimed = float(container.duration or 0) / 1_000_000
        return claimed, measured_duration(container, stream, claimed)


def timed(path: Path, runs: int) -> tuple[float, float, float]:
    """(claimed, measured, median wall seconds of opening and measuring)."""
    walls = []
    claimed = measured = 0.0
    for _ in range(runs):
        began = time.perf_counter()
        claimed, measured = measure(path)
        walls.append(time.perf_counter() - began)
    return claimed, measured, statistics.median(walls)


def whole(path: Path, decode: bool) -> float:
    began = time.perf_counter()
    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        for packet in container.demux(stream):
            if decode:
                packet.decode()
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hours", type=float, default=2.0)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="media-length-") as scratch:
        root = Path(scratch)
        recording = root / "recording.mp3"
        write_mp3(recording, args.hours * 3600)
        data = recording.read_bytes()
        cases = {"whole recording": recording}
        for percent in (90, 50, 10):
            cut = root / f"cut-{percent}.mp3"
            cut.write_bytes(data[: len(data) * percent // 100])
            cases[f"first {percent} % of it"] = cut
        short = root / "claims-ten-hours.mp3"
        write_mp3(short, 1.0)
        claim(short, 36_000.0)
        cases["1 s claiming 10 h"] = short
        for name, path in cases.items():
            claimed, measured, wall = timed(path, args.runs)
            print(f"{name}: claims {claimed:.2f} s, measured {measured:.2f} s, {wall * 1000:.1f} ms")
        print(f"whole recording, every packet demuxed: {whole(recording, False) * 1000:.1f} ms")
        print(f"whole recording, every frame decoded: {whole(recording, True) * 1000:.1f} ms")


if __name__ == "__main__":
    main()

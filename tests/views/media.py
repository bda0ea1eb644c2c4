"""Media made by real tools for the view tests: PDFs written with PDFium (pypdfium2) and Pillow, encrypted by
qpdf; audio and video encoded by FFmpeg through PyAV. Every file carries what the tests look for: a marker
per page, a known tone or a sample pattern, a frame number in every frame's brightness."""

from __future__ import annotations

import ctypes
import io
import itertools
import math
import struct
import subprocess
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import av
import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_raw
from PIL import Image


def marker(page: int) -> str:
    """Page ``page``'s marker: no marker is a prefix of another (P007 vs P070)."""
    return f"MARKER-P{page:03d}-END"


def text_pdf(pages: int, text: Callable[[int], str] = marker) -> bytes:
    """A PDF of ``pages`` US-letter pages, each with one line of text in a standard font (a text layer)."""
    pdf = pdfium.PdfDocument.new()
    try:
        for number in range(1, pages + 1):
            page = pdf.new_page(612, 792)
            line = text(number).encode("utf-16-le") + b"\0\0"
            buffer = ctypes.create_string_buffer(line, len(line))
            obj = pdfium_raw.FPDFPageObj_NewTextObj(pdf, b"Helvetica", 20.0)
            assert pdfium_raw.FPDFText_SetText(
                obj, ctypes.cast(buffer, ctypes.POINTER(pdfium_raw.FPDF_WCHAR))
            )
            pdfium_raw.FPDFPageObj_Transform(obj, 1, 0, 0, 1, 72, 700)
            pdfium_raw.FPDFPage_InsertObject(page, obj)
            assert pdfium_raw.FPDFPage_GenerateContent(page)
            page.close()
        out = io.BytesIO()
        pdf.save(out)
        return out.getvalue()
    finally:
        pdf.close()


def image_pdf(pages: int = 2) -> bytes:
    """A scan-like PDF: each page one picture (Pillow's PDF writer), no text at all."""
    images = [Image.new("RGB", (400, 500), (40 * n, 90, 160)) for n in range(1, pages + 1)]
    out = io.BytesIO()
    images[0].save(out, format="PDF", save_all=True, append_images=images[1:])
    return out.getvalue()


def scanned_pdf(lines: list[str]) -> bytes:
    """A one-page PDF that is only a picture of ``lines`` of large black text (Pillow draws and writes it):
    no text layer, but text for OCR to read."""
    from PIL import ImageDraw, ImageFont

    image = Image.new("L", (1700, 2200), 255)
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=80)
    for row, line in enumerate(lines):
        draw.text((150, 300 + 150 * row), line, fill=0, font=font)
    out = io.BytesIO()
    image.save(out, format="PDF", resolution=200.0)
    return out.getvalue()


def encrypted_pdf(tmp: Path) -> bytes:
    """A text PDF that qpdf encrypted with a user password (AES-256)."""
    plain, locked = tmp / "plain.pdf", tmp / "locked.pdf"
    plain.write_bytes(text_pdf(2))
    subprocess.run(
        ["qpdf", "--encrypt", "secret-user", "secret-owner", "256", "--", str(plain), str(locked)], check=True
    )
    return locked.read_bytes()


def looping_pdf() -> bytes:
    """A PDF whose page tree is its own child: /Pages 2 lists 2 among its /Kids (with a correct xref)."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [2 0 R] /Count 1 >>",
    ]
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


# -- audio ------------------------------------------------------------------------------------------------


def pattern_sample(index: int) -> int:
    """Sample ``index`` of the pattern WAV: unlike any neighbour, so an offset of one sample shows."""
    return ((index * 7919) % 65521) - 32760


def pattern_wav(seconds: float, rate: int = 16_000) -> bytes:
    """16-bit mono PCM whose every sample is :func:`pattern_sample` of its index (the stdlib writer)."""
    import wave

    count = round(seconds * rate)
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(rate)
        wav.writeframes(struct.pack(f"<{count}h", *(pattern_sample(i) for i in range(count))))
    return out.getvalue()


AUDIO_FORMATS = {
    # container format, codec, sample rate, sample format
    "wav": ("wav", "pcm_s16le", 44_100, "s16"),
    "flac": ("flac", "flac", 44_100, "s16"),
    "ogg": ("ogg", "libopus", 48_000, "s16"),
    "mp3": ("mp3", "libmp3lame", 44_100, "s16p"),
}


def tone(kind: str, seconds: float, frequency: float = 440.0, channels: int = 2) -> bytes:
    """``seconds`` of a sine tone at ``frequency`` Hz, encoded by FFmpeg as ``kind`` (wav, flac, ogg, mp3)."""
    return encoded(kind, seconds, lambda t: 12_000 * math.sin(2 * math.pi * frequency * t), channels)


def sweep_value(t: float) -> float:
    """The sweep at ``t`` seconds: a sine rising from 200 Hz by 40 Hz a second. No two stretches of it are
    alike, so a segment that starts a few samples early or late shows it (a steady tone repeats every
    period)."""
    return 12_000 * math.sin(2 * math.pi * (200 * t + 20 * t * t))


def sweep(kind: str, seconds: float) -> bytes:
    """``seconds`` of :func:`sweep_value`, mono, encoded by FFmpeg as ``kind``."""
    return encoded(kind, seconds, sweep_value, channels=1)


def encoded(kind: str, seconds: float, signal: Callable[[float], float], channels: int = 2) -> bytes:
    """``seconds`` of ``signal`` (a value for each time) encoded by FFmpeg as ``kind``."""
    container_format, codec, rate, sample_format = AUDIO_FORMATS[kind]
    out = io.BytesIO()
    layout = "stereo" if channels == 2 else "mono"
    with av.open(out, "w", format=container_format) as container:
        stream = container.add_stream(codec, rate=rate, layout=layout)
        assert isinstance(stream, av.AudioStream)
        stream.format = sample_format
        block = 1152 if kind == "mp3" else 960 if kind == "ogg" else 4096
        total = round(seconds * rate)
        for start in range(0, total, block):
            count = min(block, total - start)
            values = [round(signal((start + i) / rate)) for i in range(count)]
            frame = av.AudioFrame(format="s16", layout=layout, samples=count)
            interleaved = [v for v in values for _ in range(channels)]
            frame.planes[0].update(struct.pack(f"<{count * channels}h", *interleaved))
            frame.rate = rate
            frame.pts = start
            frame.time_base = Fraction(1, rate)
            for packet in stream.encode(_converted(frame, sample_format, layout, rate)):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return out.getvalue()


def _converted(frame: av.AudioFrame, sample_format: str, layout: str, rate: int) -> av.AudioFrame:
    if sample_format == "s16":
        return frame
    resampler = av.AudioResampler(format=sample_format, layout=layout, rate=rate)
    (converted,) = resampler.resample(frame)
    converted.pts = frame.pts
    return converted


ALSA_SOUNDS = Path("/usr/share/sounds/alsa")
"""Debian's alsa-utils test sounds (installed by .ci/run): a man saying each speaker's name, 48 kHz mono."""
SPOKEN = {"Front_Center": "front center", "Front_Left": "front left", "Rear_Right": "rear right"}
"""What each ALSA sound the tests use says."""


def alsa_pcm(name: str) -> bytes:
    """The 48 kHz mono s16 samples of the ALSA sound ``name`` (``Front_Center``)."""
    import wave

    with wave.open(str(ALSA_SOUNDS / f"{name}.wav"), "rb") as wav:
        assert (wav.getnchannels(), wav.getsampwidth(), wav.getframerate()) == (1, 2, 48_000)
        return wav.readframes(wav.getnframes())


def spoken_wav(names: list[str], gap: float = 10.0, rate: int = 48_000) -> bytes:
    """The ALSA sounds ``names`` one after another with ``gap`` seconds of silence between them, as a 48 kHz
    mono WAV: a recording whose speech is known in words and times."""
    import wave

    silence = bytes(2 * round(gap * rate))
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(rate)
        wav.writeframes(silence.join(alsa_pcm(name) for name in names))
    return out.getvalue()


def spoken_at(names: list[str], gap: float = 10.0) -> list[tuple[float, float]]:
    """Where each of :func:`spoken_wav`'s sounds starts and ends, in seconds."""
    spans, at = [], 0.0
    for name in names:
        length = len(alsa_pcm(name)) / 2 / 48_000
        spans.append((at, at + length))
        at += length + gap
    return spans


def silent_flac(seconds: float, rate: int = 8_000) -> bytes:
    """``seconds`` of digital silence as mono FLAC (a few hundred bytes a minute): ten hours fit in a few
    MB."""
    out = io.BytesIO()
    with av.open(out, "w", format="flac") as container:
        stream = container.add_stream("flac", rate=rate, layout="mono")
        assert isinstance(stream, av.AudioStream)
        block = rate * 10
        zeros = bytes(2 * block)
        for start in range(0, round(seconds * rate), block):
            frame = av.AudioFrame(format="s16", layout="mono", samples=block)
            frame.planes[0].update(zeros)
            frame.rate = rate
            frame.pts = start
            frame.time_base = Fraction(1, rate)
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return out.getvalue()


def as_mp3(wav: bytes) -> bytes:
    """``wav`` encoded by FFmpeg (LAME) as a mono MP3."""
    out = io.BytesIO()
    with av.open(io.BytesIO(wav), "r") as source, av.open(out, "w", format="mp3") as container:
        stream = container.add_stream("libmp3lame", rate=44_100, layout="mono")
        assert isinstance(stream, av.AudioStream)
        resampler = av.AudioResampler(format="s16p", layout="mono", rate=44_100)
        for frame in source.decode(audio=0):
            for piece in resampler.resample(frame):
                piece.pts = None
                for packet in stream.encode(piece):
                    container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return out.getvalue()


def many_channels_wav(channels: int = 64, seconds: float = 1.0, rate: int = 16_000) -> bytes:
    """A WAV of ``channels`` channels (the stdlib writer allows any count), each the ALSA voice's start."""
    import wave

    voice = alsa_pcm("Front_Center")[: 2 * round(seconds * 48_000) : 6]  # every third sample: 16 kHz
    count = len(voice) // 2
    samples = struct.unpack(f"<{count}h", voice[: 2 * count])
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(channels)
        wav.setsampwidth(2)
        wav.setframerate(rate)
        wav.writeframes(struct.pack(f"<{count * channels}h", *(v for v in samples for _ in range(channels))))
    return out.getvalue()


def lying_wav(claimed_seconds: float = 600.0) -> bytes:
    """A WAV header that claims ``claimed_seconds`` of audio followed by a tenth of a second of samples."""
    rate, real = 16_000, 1_600
    claimed = round(claimed_seconds * rate) * 2
    header = b"RIFF" + struct.pack("<I", 36 + claimed) + b"WAVE"
    header += b"fmt " + struct.pack("<IHHIIHH", 16, 1, 1, rate, rate * 2, 2, 16)
    header += b"data" + struct.pack("<I", claimed)
    return header + bytes(2 * real)


def claiming_mp3(seconds: float, claimed_seconds: float) -> bytes:
    """:func:`tone` as MP3 whose LAME ``Info`` tag counts the frames of ``claimed_seconds`` (FFmpeg writes
    the tag; its frame count is the duration players and FFmpeg report)."""
    data = bytearray(tone("mp3", seconds))
    tag = data.find(b"Info")
    (flags,) = struct.unpack_from(">I", data, tag + 4)
    assert flags & 1, "the Info tag carries no frame count"
    struct.pack_into(">I", data, tag + 8, round(claimed_seconds * 44_100 / 1152))
    return bytes(data)


def decodable_seconds(path: str) -> float:
    """How much of the first audio stream of ``path`` decodes, from its first sample: every frame decoded
    (what a player would play), errors ending it."""
    with av.open(path) as container:
        stream = container.streams.audio[0]
        samples = 0
        try:
            for frame in container.decode(stream):
                samples += frame.samples
        except av.FFmpegError:
            pass
        return samples / stream.rate


def samples_of(wav: bytes) -> tuple[int, int, int, bytes]:
    """Channels, sample rate, sample width and the PCM frames of a WAV file (the stdlib reader)."""
    import wave

    with wave.open(io.BytesIO(wav), "rb") as reader:
        return reader.getnchannels(), reader.getframerate(), reader.getsampwidth(), reader.readframes(-1)


def sweep_lag(pcm: bytes, start: float, rate: int = 16_000, most: int = 800) -> int:
    """How many samples later than ``start`` the sweep in ``pcm`` (16-bit mono at ``rate``) really starts
    (negative: earlier), searched within ``most`` samples either way."""
    values: tuple[int, ...] = struct.unpack(f"<{len(pcm) // 2}h", pcm)
    points = range(0, min(len(values), rate), 16)
    ideal = [sweep_value(start + (j - most) / rate) for j in range(2 * most + max(points) + 1)]

    def error(lag: int) -> float:
        return sum((values[i] - ideal[i + lag + most]) ** 2 for i in points)

    return min(range(-most, most + 1), key=error)


def zero_crossings(pcm: bytes) -> int:
    values = struct.unpack(f"<{len(pcm) // 2}h", pcm)
    return sum(1 for a, b in itertools.pairwise(values) if (a < 0) != (b < 0))


# -- video ------------------------------------------------------------------------------------------------

VIDEO_FPS = 10
VIDEO_GOP = 10


def numbered_video(seconds: int = 6, container_format: str = "mp4", first_second: int = 0) -> bytes:
    """An H.264 video (x264) at 10 frames/s with a keyframe every second and nowhere else; frame ``n`` is a
    flat gray of level ``4 * n`` (so a decoded frame tells its number). Its timestamps start at
    ``first_second``, as an MPEG-TS recording's do (``container_format="mpegts"`` keeps them)."""
    out = io.BytesIO()
    with av.open(out, "w", format=container_format) as container:
        stream = container.add_stream(
            "libx264",
            rate=VIDEO_FPS,
            options={"x264-params": f"keyint={VIDEO_GOP}:min-keyint={VIDEO_GOP}:scenecut=0:bframes=0"},
        )
        assert isinstance(stream, av.VideoStream)
        stream.width, stream.height = 320, 240
        stream.pix_fmt = "yuv420p"
        for number in range(seconds * VIDEO_FPS):
            image = Image.new("RGB", (320, 240), (4 * number,) * 3)
            frame = av.VideoFrame.from_image(image)  # type: ignore[no-untyped-call]
            frame.pts = number + first_second * VIDEO_FPS
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return out.getvalue()


def video_with_sound(seconds: int = 20) -> bytes:
    """An H.264 + AAC MP4 (FFmpeg's encoders): frames like :func:`numbered_video`'s at 160x120, and
    :func:`sweep_value` as its sound (44.1 kHz mono)."""
    rate, block = 44_100, 1024
    out = io.BytesIO()
    with av.open(out, "w", format="mp4") as container:
        video = container.add_stream("libx264", rate=VIDEO_FPS)
        assert isinstance(video, av.VideoStream)
        video.width, video.height = 160, 120
        video.pix_fmt = "yuv420p"
        sound = container.add_stream("aac", rate=rate, layout="mono")
        assert isinstance(sound, av.AudioStream)
        for number in range(seconds * VIDEO_FPS):
            frame = av.VideoFrame.from_image(Image.new("RGB", (160, 120), (number % 256,) * 3))  # type: ignore[no-untyped-call]
            frame.pts = number
            for packet in video.encode(frame):
                container.mux(packet)
        for start in range(0, seconds * rate, block):
            count = min(block, seconds * rate - start)
            piece = av.AudioFrame(format="s16", layout="mono", samples=count)
            values = [round(sweep_value((start + i) / rate)) for i in range(count)]
            piece.planes[0].update(struct.pack(f"<{count}h", *values))
            piece.rate = rate
            piece.pts = start
            piece.time_base = Fraction(1, rate)
            for packet in sound.encode(_converted(piece, "fltp", "mono", rate)):
                container.mux(packet)
        for stream in (video, sound):
            for packet in stream.encode(None):
                container.mux(packet)
    return out.getvalue()


def gray_level(jpeg: bytes) -> float:
    """The mean brightness of an image (a frame of :func:`numbered_video` is flat)."""
    with Image.open(io.BytesIO(jpeg)) as image:
        gray = image.convert("L")
        return sum(gray.tobytes()) / (gray.width * gray.height)


def png_bytes(width: int, height: int) -> bytes:
    """A PNG whose pixel (x, y) is (x % 256, y % 256, 0): a crop shows where it was cut."""
    image = Image.new("RGB", (width, height))
    image.putdata([(x % 256, y % 256, 0) for y in range(height) for x in range(width)])
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


# -- text for OCR -----------------------------------------------------------------------------------------

DEJAVU_SANS = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
"""Debian's fonts-dejavu-core: printed text for the OCR tests."""
WQY_MICROHEI = Path("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc")
"""Debian's fonts-wqy-microhei: printed Chinese for the OCR tests."""


Box = tuple[int, int, int, int]


def printed_text(
    lines: list[str], *, size: int = 28, font: Path = DEJAVU_SANS, margin: int = 24
) -> tuple[bytes, list[tuple[str, Box]]]:
    """A PNG of ``lines`` printed black on white in ``font`` (Pillow's FreeType rendering), and each word
    with the box ``[x, y, w, h]`` its ink covers."""
    from PIL import ImageDraw, ImageFont

    face = ImageFont.truetype(str(font), size)
    step = round(size * 1.6)
    width = margin * 2 + max(round(face.getlength(line)) for line in lines)
    image = Image.new("RGB", (width, margin * 2 + step * len(lines)), "white")
    draw = ImageDraw.Draw(image)
    boxes: list[tuple[str, Box]] = []
    for row, line in enumerate(lines):
        y = margin + row * step
        draw.text((margin, y), line, fill="black", font=face)
        x = float(margin)
        for word in line.split(" "):
            left, top, right, bottom = draw.textbbox((x, y), word, font=face)
            boxes.append((word, (round(left), round(top), round(right - left), round(bottom - top))))
            x += face.getlength(word + " ")
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue(), boxes


def png_bomb(side: int = 30_000) -> bytes:
    """A valid one-bit PNG of ``side`` x ``side`` white pixels (900 million at 30000; 900 MB as 8-bit gray,
    what OCR would read), about 120 KB on disk: a decompression bomb."""
    import zlib

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    squeeze = zlib.compressobj(9)
    row = b"\x00" + b"\xff" * ((side + 7) // 8)
    rows = 64
    data = b"".join(squeeze.compress(row * rows) for _ in range(side // rows))
    data += squeeze.compress(row * (side % rows)) + squeeze.flush()
    header = struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", data) + chunk(b"IEND", b"")


# -- videos with scenes -----------------------------------------------------------------------------------


def manual_page(number: int, width: int) -> Image.Image:
    """Page ``number`` of the libtasn1 manual rendered by PDFium ``width`` pixels wide: a real picture."""
    from tests.views.conftest import LIBTASN1_PDF

    pdf = pdfium.PdfDocument(str(LIBTASN1_PDF))
    try:
        page = pdf[number - 1]
        bitmap = page.render(scale=width / page.get_width())
        image: Image.Image = bitmap.to_pil().convert("RGB")
        bitmap.close()
        page.close()
        return image
    finally:
        pdf.close()


SCENE_CUTS = (2.0, 4.0)
"""Where :func:`scenes_video` cuts: its scenes start at 0, 2 and 4 s."""


def scenes_video() -> bytes:
    """Six seconds of H.264 at 10 frames/s, 320x240, with a keyframe every 2.5 s (not at the cuts): page 1 of
    the libtasn1 manual scrolling down 6 px a frame (0-2 s), then page 7 (2-4 s), then page 20 (4-6 s),
    each still. Two hard cuts between pictures that look alike, and a scroll that is no cut."""
    first = manual_page(1, 320)
    shots = [first.crop((0, 6 * n, 320, 6 * n + 240)) for n in range(20)]
    shots += [manual_page(7, 320).crop((0, 40, 320, 280))] * 20
    shots += [manual_page(20, 320).crop((0, 40, 320, 280))] * 20
    return _h264(shots, 320, 240, keyint=25)


def flashing_video(frames: int = 10_000) -> bytes:
    """``frames`` frames of 32x32 at 25 frames/s, each a scene of its own: dark and bright flat colours in
    turn, every one different from the one before."""
    shots = []
    for n in range(frames):
        level = (n * 37) % 60 + (195 if n % 2 else 0)
        shots.append(Image.new("RGB", (32, 32), (level, 255 - level, (n * 91) % 256)))
    return _h264(shots, 32, 32, keyint=250, rate=25, preset="ultrafast")


def _h264(
    shots: list[Image.Image], width: int, height: int, *, keyint: int, rate: int = 10, preset: str = "medium"
) -> bytes:
    out = io.BytesIO()
    with av.open(out, "w", format="mp4") as container:
        stream = container.add_stream(
            "libx264",
            rate=rate,
            options={"x264-params": f"keyint={keyint}:min-keyint={keyint}:scenecut=0", "preset": preset},
        )
        assert isinstance(stream, av.VideoStream)
        stream.width, stream.height = width, height
        stream.pix_fmt = "yuv420p"
        for number, shot in enumerate(shots):
            frame = av.VideoFrame.from_image(shot)  # type: ignore[no-untyped-call]
            frame.pts = number
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return out.getvalue()

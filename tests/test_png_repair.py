"""PNG chunks checked as browsers check them: the chunk walker over random chunk sequences fed in random
pieces, ancillary CRC failures dropped and critical ones refused, and Pillow reading what is left."""

from __future__ import annotations

import io
import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image, UnidentifiedImageError

from blobstore.errors import MediaInvalid
from blobstore.png_repair import MAX_DROPPED, SIGNATURE, ChunkWalker, checked_png
from tests.fixtures.png_chunks import png_chunk, png_chunks, rebuilt, tiny_image_png

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

# A chunk: its type (four letters, never IEND: that one ends every stream), its data, whether its CRC holds.
chunk_kinds = st.text(LETTERS, min_size=4, max_size=4).map(str.encode).filter(lambda kind: kind != b"IEND")
chunks = st.lists(st.tuples(chunk_kinds, st.binary(max_size=300), st.booleans()), max_size=12)


def stream_of(specs: list[tuple[bytes, bytes, bool]], iend_ok: bool = True) -> bytes:
    return (
        SIGNATURE
        + b"".join(png_chunk(k, d, crc_ok=ok) for k, d, ok in specs)
        + png_chunk(b"IEND", b"", crc_ok=iend_ok)
    )


def pieces(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({0, len(data), *(cut % (len(data) + 1) for cut in cuts)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


def ancillary(kind: bytes) -> bool:
    return kind[:1].islower()


@settings(max_examples=300, deadline=None)
@given(chunks, st.booleans(), st.lists(st.integers(min_value=0), max_size=20))
def test_the_walker_reports_every_chunk_and_its_crc_however_the_bytes_are_cut(
    specs: list[tuple[bytes, bytes, bool]], iend_ok: bool, cuts: list[int]
) -> None:
    data = stream_of(specs, iend_ok) + b"trailing bytes after IEND"
    walker = ChunkWalker()
    seen = [chunk for piece in pieces(data, cuts) for chunk in walker.feed(piece)]
    expected = [*specs, (b"IEND", b"", iend_ok)]
    assert [(c.kind, c.length, c.crc_ok) for c in seen] == [(k, len(d), ok) for k, d, ok in expected]
    assert [c.ancillary for c in seen] == [ancillary(k) for k, _, _ in expected]
    starts = [len(SIGNATURE)]
    for chunk in seen[:-1]:
        starts.append(chunk.end)
    assert [c.start for c in seen] == starts
    assert walker.finished
    assert walker.offset == seen[-1].end  # what follows IEND is not consumed


@settings(max_examples=300, deadline=None)
@given(chunks, st.booleans(), st.randoms(use_true_random=False))
def test_checked_png_drops_bad_ancillary_chunks_and_refuses_a_bad_critical_one(
    specs: list[tuple[bytes, bytes, bool]], iend_ok: bool, rng: random.Random
) -> None:
    data = stream_of(specs, iend_ok)
    critical_bad = [k for k, _, ok in [*specs, (b"IEND", b"", iend_ok)] if not ok and not ancillary(k)]
    if critical_bad:
        with pytest.raises(MediaInvalid, match=f"critical {critical_bad[0].decode()} chunk .* CRC"):
            checked_png(io.BytesIO(data))
        return
    kept = stream_of([(k, d, ok) for k, d, ok in specs if ok])
    source = io.BytesIO(data)
    view = checked_png(source)
    assert (view is source) == (kept == data)
    assert view.read() == kept
    # Seeks and short reads anywhere in the view give the bytes of the stream without the dropped chunks.
    for _ in range(10):
        at, size = rng.randrange(len(kept) + 5), rng.randrange(1, 80)
        view.seek(at)
        assert view.read(size) == kept[at : at + size]
        assert view.tell() == min(at + size, max(at, len(kept)))
    assert view.seek(-3, io.SEEK_END) == len(kept) - 3


@settings(max_examples=200, deadline=None)
@given(chunks, st.integers(min_value=0))
def test_a_stream_cut_short_keeps_its_unfinished_chunk_for_the_decoder(
    specs: list[tuple[bytes, bytes, bool]], cut: int
) -> None:
    whole = stream_of([(k, d, True) for k, d, _ in specs])
    head = whole[: cut % (len(whole) + 1)]
    walker = ChunkWalker()
    seen = walker.feed(head)
    assert all(chunk.end <= len(head) for chunk in seen)
    assert all(chunk.crc_ok for chunk in seen)
    assert checked_png(io.BytesIO(head)).read() == head


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"GIF89a not a png at all",
        SIGNATURE + b"\x00\x00\x00\x04IH1R" + b"\x00" * 8,  # out of step: not a chunk type
        SIGNATURE + b"\xff\xff\xff\xffIDAT",  # a length past 2^31-1
    ],
)
def test_what_is_not_a_walkable_png_is_left_to_the_decoder(data: bytes) -> None:
    source = io.BytesIO(data)
    assert checked_png(source) is source
    assert source.tell() == 0


def test_the_tiny_image_decodes_to_the_pixels_it_has_with_its_profile_mended() -> None:
    tiny = tiny_image_png()
    bad = [kind for kind, _, crc_ok in png_chunks(tiny) if not crc_ok]
    assert bad == [b"iCCP"]  # the upstream's image as it ships
    with pytest.raises(UnidentifiedImageError):
        Image.open(io.BytesIO(tiny))
    with (
        Image.open(checked_png(io.BytesIO(tiny))) as shown,
        Image.open(io.BytesIO(rebuilt(tiny, fix=True))) as mended,
    ):
        assert shown.size == (20, 20)
        assert "icc_profile" not in shown.info
        assert shown.tobytes() == mended.tobytes()


@pytest.mark.parametrize("kind", [b"IHDR", b"IDAT", b"IEND"])
def test_a_critical_chunks_bad_crc_is_refused_naming_the_chunk(kind: bytes) -> None:
    broken = rebuilt(tiny_image_png(), fix=True, corrupt=kind)
    with pytest.raises(MediaInvalid, match=f"critical {kind.decode()} chunk"):
        checked_png(io.BytesIO(broken))


def test_a_palette_chunks_bad_crc_is_refused() -> None:
    out = io.BytesIO()
    Image.new("P", (8, 8), 3).save(out, format="PNG")
    with pytest.raises(MediaInvalid, match="critical PLTE chunk"):
        checked_png(io.BytesIO(rebuilt(out.getvalue(), corrupt=b"PLTE")))


def test_a_file_of_countless_damaged_chunks_is_refused_not_held() -> None:
    damaged = png_chunk(b"tEXt", b"note", crc_ok=False)
    within = SIGNATURE + damaged * MAX_DROPPED + png_chunk(b"IEND", b"")
    assert checked_png(io.BytesIO(within)).read() == SIGNATURE + png_chunk(b"IEND", b"")
    with pytest.raises(MediaInvalid, match=f"more than {MAX_DROPPED} chunks"):
        checked_png(io.BytesIO(SIGNATURE + damaged * (MAX_DROPPED + 1) + png_chunk(b"IEND", b"")))

"""Thumbnails: within the long edge, PNG where transparency shows and JPEG elsewhere, nothing for what Pillow
must not or cannot decode, and a cache that stays within its bytes."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from blobstore.api.console.thumbnails import NoThumbnail, Thumbnail, ThumbnailCache, make_thumbnail
from tests.fixtures.png_chunks import rebuilt, tiny_image_png


def encoded(image: Image.Image, fmt: str = "PNG") -> bytes:
    out = io.BytesIO()
    image.save(out, format=fmt)
    return out.getvalue()


def test_an_opaque_image_becomes_a_jpeg_within_the_edge() -> None:
    made = make_thumbnail(encoded(Image.new("RGB", (900, 300), (10, 20, 30)), "JPEG"), 160)
    assert made.mime_type == "image/jpeg"
    assert (made.width, made.height) == (160, 53)
    assert Image.open(io.BytesIO(made.data)).size == (160, 53)


def test_transparency_keeps_a_png_and_a_small_image_is_never_enlarged() -> None:
    made = make_thumbnail(encoded(Image.new("RGBA", (40, 20), (255, 0, 0, 0))), 160)
    assert made.mime_type == "image/png"
    assert (made.width, made.height) == (40, 20)
    assert Image.open(io.BytesIO(made.data)).getpixel((0, 0)) == (255, 0, 0, 0)


@pytest.mark.parametrize("data", [b"not an image at all", b"\x89PNG\r\n\x1a\n" + b"\0" * 64])
def test_what_pillow_cannot_read_has_no_thumbnail(data: bytes) -> None:
    with pytest.raises(NoThumbnail):
        make_thumbnail(data, 160)


def test_a_png_is_read_as_browsers_read_it() -> None:
    # The ancillary iCCP chunk whose CRC fails is dropped; a critical chunk whose CRC fails is refused.
    made = make_thumbnail(tiny_image_png(), 160)
    assert (made.width, made.height) == (20, 20)
    with pytest.raises(NoThumbnail, match="IDAT"):
        make_thumbnail(rebuilt(tiny_image_png(), fix=True, corrupt=b"IDAT"), 160)


def test_the_cache_drops_the_least_recently_used_beyond_its_bytes() -> None:
    cache = ThumbnailCache(max_bytes=250)
    items = {name: Thumbnail(bytes(100), "image/png", 1, 1) for name in "abc"}
    cache.put(("ns", "a", 160), items["a"])
    cache.put(("ns", "b", 160), items["b"])
    assert cache.get(("ns", "a", 160)) is items["a"]  # a is now the most recent
    cache.put(("ns", "c", 160), items["c"])
    assert cache.get(("ns", "b", 160)) is None
    assert cache.get(("ns", "a", 160)) is items["a"]
    assert cache.get(("ns", "c", 160)) is items["c"]
    cache.put(("ns", "d", 160), Thumbnail(bytes(300), "image/png", 1, 1))  # larger than the whole cache
    assert cache.get(("ns", "d", 160)) is None

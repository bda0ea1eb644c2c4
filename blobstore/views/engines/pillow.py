"""Pillow: images decoded within a pixel budget, cropped and fitted to a long edge, and encoded as PNG or
JPEG; several pictures set out on one contact sheet."""

from __future__ import annotations

import io
import math
import warnings
from typing import IO, Any, Final

from blobstore.errors import MediaInvalid, ViewTooLarge
from blobstore.png_repair import checked_png

MAX_DECODE_PIXELS: Final = 80_000_000
"""Images with more pixels are refused before decoding (Pillow's bomb warning starts near 89 MP)."""

_PNG_MODES: Final = frozenset({"1", "L", "I;16", "RGB", "RGBA"})
"""Pillow modes a PNG holds as they are."""
_ALPHA_MODES: Final = frozenset({"P", "LA", "PA", "La", "RGBa"})


def fit(image: Any, max_edge: int) -> Any:
    """``image`` scaled down (never up) so that its longer side is at most ``max_edge``."""
    from PIL import Image

    scale = min(1.0, max_edge / max(image.width, image.height))
    if scale >= 1.0:
        return image
    size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
    return image.resize(size, Image.Resampling.LANCZOS)


def png_mode(image: Any) -> Any:
    """``image`` in a mode PNG can hold: a valid CMYK JPEG, a LAB or a float TIFF is shown in RGB rather
    than refused by the PNG writer; palette and alpha images keep their transparency."""
    if image.mode in _PNG_MODES:
        return image
    return image.convert("RGBA" if image.mode in _ALPHA_MODES else "RGB")


def on_white(image: Any) -> Any:
    """``image`` as 8-bit gray, its transparent parts white: what OCR reads best (a transparent
    screenshot's text would otherwise stand on black)."""
    from PIL import Image

    if image.mode in _ALPHA_MODES or image.mode == "RGBA":
        rgba = image.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("L")
    return image.convert("L")


def png(image: Any) -> bytes:
    data = io.BytesIO()
    image.save(data, format="PNG", optimize=True)
    return data.getvalue()


def jpeg(image: Any) -> bytes:
    data = io.BytesIO()
    image.convert("RGB").save(data, format="JPEG", quality=85)
    return data.getvalue()


def contact_sheet(images: list[Any], max_edge: int) -> tuple[Any, int]:
    """``images`` in a grid of equal cells, the whole at most ``max_edge`` on its longer side; and the
    number of columns."""
    from PIL import Image

    columns = math.ceil(math.sqrt(len(images)))
    rows = math.ceil(len(images) / columns)
    cell_w = max(image.width for image in images)
    cell_h = max(image.height for image in images)
    scale = min(1.0, max_edge / max(cell_w * columns, cell_h * rows))
    cell = (max(1, round(cell_w * scale)), max(1, round(cell_h * scale)))
    sheet = Image.new("RGB", (cell[0] * columns, cell[1] * rows))
    for i, image in enumerate(images):
        sheet.paste(image.resize(cell), ((i % columns) * cell[0], (i // columns) * cell[1]))
    return sheet, columns


def region(
    path: str, box: list[int] | None, max_edge: int
) -> tuple[Any, tuple[int, int], tuple[int, int, int, int]]:
    """The crop ``[x, y, w, h]`` of the image at ``path`` (all of it for None), decoded: the pixels, the
    original's size and the box actually cut (a crop past the border ends there). ``view_too_large`` past
    :data:`MAX_DECODE_PIXELS`, ``media_invalid`` for bytes Pillow cannot decode or a crop outside the image.
    ``max_edge`` lets a whole JPEG decode at a reduced size. A PNG is read as browsers read it
    (:func:`~blobstore.png_repair.checked_png`)."""
    with open(path, "rb") as raw:
        return _region(checked_png(raw), box, max_edge)


def _open(source: IO[bytes]) -> Any:
    """The image in ``source``, opened (not decoded): ``view_too_large`` past :data:`MAX_DECODE_PIXELS`,
    ``media_invalid`` for bytes Pillow does not take for an image."""
    from PIL import Image

    Image.MAX_IMAGE_PIXELS = MAX_DECODE_PIXELS
    try:
        with warnings.catch_warnings():
            # Between one and two times the limit Pillow only warns: the size checks refuse those.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = Image.open(source)
    except Image.DecompressionBombError:
        raise ViewTooLarge(f"the image has more than {MAX_DECODE_PIXELS} pixels") from None
    except Exception:
        raise MediaInvalid("the file is not an image Pillow can decode") from None
    width, height = image.size
    if width * height > MAX_DECODE_PIXELS:
        image.close()
        raise ViewTooLarge(f"the image has more than {MAX_DECODE_PIXELS} pixels")
    return image


_CHECK_EDGE: Final = 64
"""A JPEG is checked by decoding it at its smallest DCT scale (an eighth), never at full size."""


def facts(path: str) -> dict[str, Any]:
    """Format, pixel size, mode and frame count of an image, after checking that it decodes: a PNG's chunks
    against their CRCs up to ``IEND`` (read as browsers read it), a JPEG at an eighth of its size, other
    formats their first frame."""
    with open(path, "rb") as raw, _open(checked_png(raw)) as image:
        width, height = image.size
        meta = {
            "format": (image.format or "").lower(),
            "width": width,
            "height": height,
            "mode": image.mode,
            "frames": int(getattr(image, "n_frames", 1)),
        }
        try:
            if image.format == "PNG":
                image.verify()
            else:
                if image.format == "JPEG":
                    image.draft(image.mode, (_CHECK_EDGE, _CHECK_EDGE))
                image.load()
        except Exception:
            raise MediaInvalid("the image's data could not be decoded") from None
    return meta


def _region(
    source: IO[bytes], box: list[int] | None, max_edge: int
) -> tuple[Any, tuple[int, int], tuple[int, int, int, int]]:
    with _open(source) as image:
        width, height = image.size
        cut = (0, 0, width, height)
        if box is not None:
            x, y, w, h = box
            if x >= width or y >= height:
                raise MediaInvalid(f"the region starts outside the {width}x{height} image")
            cut = (x, y, min(width, x + w), min(height, y + h))
        try:
            if box is None and image.format == "JPEG":
                image.draft("RGB", (max_edge, max_edge))
            piece = image.crop(cut) if box is not None else image.copy()
            piece.load()
        except Exception:
            raise MediaInvalid("the image's pixels could not be decoded") from None
    return piece, (width, height), cut

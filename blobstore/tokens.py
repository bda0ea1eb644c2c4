"""What a model spends on a block: token estimates for images (by their pixels), audio (by its length) and
text (by its characters), for budgets and the first lines of answers. Estimates, not bills."""

from __future__ import annotations

import math
from typing import Final

TOKEN_TILE_PX: Final = 28
"""Edge of one vision tile. 28 x 28 px = 784 px per token, close to the published
"tokens ~ width x height / 750" rule for Claude-style vision encoders."""
TOKENS_PER_TILE: Final = 1
TOKEN_BASE: Final = 0
"""Fixed overhead per image; zero for the tile-per-token encoders these constants describe."""
TOKEN_MAX_LONG_EDGE: Final = 1568
"""Hosts downscale larger images to this long edge before encoding (the seeds' "1568 px long-edge" models)."""
TOKEN_MAX_PIXELS: Final = 1_150_000
"""…and to about 1.15 megapixels in total."""


def estimate_image_tokens(
    width: int,
    height: int,
    *,
    tile: int = TOKEN_TILE_PX,
    tokens_per_tile: int = TOKENS_PER_TILE,
    base: int = TOKEN_BASE,
    max_long_edge: int = TOKEN_MAX_LONG_EDGE,
    max_pixels: int = TOKEN_MAX_PIXELS,
) -> int:
    """Tokens a vision model spends on a ``width`` x ``height`` image: ``ceil(w/tile) * ceil(h/tile) *
    tokens_per_tile + base`` after the host's own downscale to ``max_long_edge`` and ``max_pixels``.

    With the defaults this reproduces the seeds' table: 512x512 ~ 250-400, 1024x768 ~ 700-1100,
    1920x1080 ~ 1300-1600 tokens. It is an estimate for budgeting, not a bill.
    """
    if width <= 0 or height <= 0:
        raise ValueError("width and height must be positive")
    scale = min(1.0, max_long_edge / max(width, height), math.sqrt(max_pixels / (width * height)))
    w = max(1, math.floor(width * scale))
    h = max(1, math.floor(height * scale))
    return math.ceil(w / tile) * math.ceil(h / tile) * tokens_per_tile + base


AUDIO_TOKENS_PER_SECOND: Final = 32
"""Audio input is billed by time, not bytes: 32 tokens per second is Gemini's published rate, and the
highest of the hosts that take audio blocks, so the estimate errs on the side of the budget."""
TEXT_CHARS_PER_TOKEN: Final = 4
"""English prose runs about four characters per token in the common tokenizers."""


def estimate_audio_tokens(seconds: float) -> int:
    """Tokens an audio-capable model spends on ``seconds`` of audio (any sample rate): ``ceil(32 * s)``."""
    if seconds < 0:
        raise ValueError("seconds must not be negative")
    return math.ceil(seconds * AUDIO_TOKENS_PER_SECOND)


def estimate_text_tokens(text: str) -> int:
    """Tokens of a text (a page's text layer): ``ceil(characters / 4)``."""
    return math.ceil(len(text) / TEXT_CHARS_PER_TOKEN)

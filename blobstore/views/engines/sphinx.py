"""PocketSphinx (``pocketsphinx`` on PyPI, BSD): speech to words with its shipped US English model, offline.

Low accuracy (docs/views.md has the measured word error rate) but no model to fetch: the wheel carries its
acoustic model, dictionary and language model. One decoder is loaded per worker job and decodes each span of
speech as one utterance; its words come with their times (10 ms frames) and posterior probabilities.
"""

from __future__ import annotations

from typing import Any, Final

from blobstore.errors import UnsupportedMedia

NAME: Final = "pocketsphinx"
LANGUAGES: Final = ("en-us",)
"""The languages whose models the wheel ships."""
_FRAMES_PER_SECOND: Final = 100
_FILLERS: Final = frozenset({"<s>", "</s>", "<sil>"})


def version() -> str:
    """``pocketsphinx 5.1.1``: part of every transcript's cache key, so another engine transcribes afresh."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return f"{NAME} {installed('pocketsphinx')}"
    except PackageNotFoundError:
        raise UnsupportedMedia("no speech engine is installed (pip install pocketsphinx)") from None


class Recognizer:
    """A PocketSphinx decoder for ``language`` (``unsupported_media`` for one whose model is not shipped;
    ``model`` is unused: the wheel's own is read)."""

    def __init__(self, language: str | None, model: str | None = None) -> None:
        language = language or LANGUAGES[0]
        self.language: str | None = language
        if language not in LANGUAGES:
            raise UnsupportedMedia(
                f"PocketSphinx has no model for language {language!r} (it ships {', '.join(LANGUAGES)})"
            )
        try:
            from pocketsphinx import Decoder
        except ImportError:
            raise UnsupportedMedia("no speech engine is installed (pip install pocketsphinx)") from None
        self._decoder = Decoder(samprate=16_000, logfn="/dev/null")

    def transcribe(self, pcm: bytes, offset: float) -> dict[str, Any] | None:
        """One utterance of 16 kHz mono s16 ``pcm`` that starts ``offset`` seconds into the recording, as a
        segment ``{start, end, text, confidence, words}`` (times from the recording's start, the confidence
        the mean of its words' posteriors); None when no word is heard in it."""
        decoder = self._decoder
        decoder.start_utt()
        decoder.process_raw(pcm, full_utt=True)
        decoder.end_utt()
        words = [
            {
                "word": found.word,
                "start": round(offset + found.start_frame / _FRAMES_PER_SECOND, 2),
                "end": round(offset + (found.end_frame + 1) / _FRAMES_PER_SECOND, 2),
                "confidence": round(min(1.0, max(0.0, float(found.prob))), 3),
            }
            for found in decoder.seg()
            if found.word not in _FILLERS and not found.word.startswith("[")
        ]
        if not words:
            return None
        for word in words:
            word["word"] = _spelled(str(word["word"]))
        return {
            "start": words[0]["start"],
            "end": words[-1]["end"],
            "text": " ".join(str(word["word"]) for word in words),
            "confidence": round(sum(float(word["confidence"]) for word in words) / len(words), 3),
            "words": words,
        }


def _spelled(word: str) -> str:
    """A dictionary entry without its alternative-pronunciation mark: ``the(2)`` is ``the``."""
    return word.split("(", 1)[0] if word.endswith(")") else word

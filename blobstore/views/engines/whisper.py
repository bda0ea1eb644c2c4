"""faster-whisper (CTranslate2, MIT; the ``whisper`` extra): speech to words with a Whisper model the operator
provides as a local CTranslate2 directory.

Never downloads: the directory must hold ``model.bin``, ``config.json`` and ``tokenizer.json`` (faster-whisper
would fetch a missing tokenizer from a model hub), and the hub's client is told to stay offline besides. A
missing package, directory or file, or a model CTranslate2 cannot load, is ``unsupported_media`` saying which.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from blobstore.errors import UnsupportedMedia

NAME: Final = "whisper"
MODEL_FILES: Final = ("model.bin", "config.json", "tokenizer.json")


def version() -> str:
    """``faster-whisper 1.2.1``: part of every transcript's cache key."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return f"faster-whisper {installed('faster-whisper')}"
    except PackageNotFoundError:
        raise UnsupportedMedia(
            "the whisper engine is not installed (pip install 'mcp-blobstore[whisper]')"
        ) from None


def checked_model(directory: str | None) -> Path:
    """The model directory, once it holds every file a CTranslate2 Whisper model needs."""
    if directory is None:
        raise UnsupportedMedia("the whisper engine needs BLOBSTORE_TRANSCRIBE_MODEL, a local model directory")
    path = Path(directory)
    if not path.is_dir():
        raise UnsupportedMedia(f"the whisper model directory {directory} does not exist")
    missing = [name for name in MODEL_FILES if not (path / name).is_file()]
    if missing:
        raise UnsupportedMedia(
            f"the whisper model directory {directory} has no {', '.join(missing)}: it is not a CTranslate2 "
            "Whisper model (ct2-transformers-converter --copy_files tokenizer.json makes one)"
        )
    return path


def model_id(directory: str | None) -> str:
    """The model as a transcript's cache key names it: its directory, and the size and time of its weights,
    so a model replaced in place transcribes afresh."""
    path = checked_model(directory)
    weights = (path / "model.bin").stat()
    return f"{path.resolve()}:{weights.st_size}:{weights.st_mtime_ns}"


class Recognizer:
    """A Whisper model loaded from ``model`` for ``language`` (None: detected per utterance), on the CPU with
    8-bit weights."""

    def __init__(self, language: str | None, model: str | None) -> None:
        import os

        os.environ["HF_HUB_OFFLINE"] = "1"  # belt and braces: nothing of a hub is ever fetched
        path = checked_model(model)
        try:
            from faster_whisper import WhisperModel
        except ImportError:
            raise UnsupportedMedia(
                "the whisper engine is not installed (pip install 'mcp-blobstore[whisper]')"
            ) from None
        try:
            self._model = WhisperModel(str(path), device="cpu", compute_type="int8", local_files_only=True)
        except (RuntimeError, ValueError, OSError) as exc:
            raise UnsupportedMedia(f"the whisper model in {model} could not be loaded: {exc}") from None
        self._language = language.split("-")[0] if language else None
        self.language: str | None = self._language

    def transcribe(self, pcm: bytes, offset: float) -> dict[str, Any] | None:
        """One utterance of 16 kHz mono s16 ``pcm`` starting ``offset`` seconds into the recording, as one
        segment (Whisper's own segments of it joined; the confidence the mean of its words'
        probabilities); None when no word is heard."""
        import numpy as np

        audio = np.frombuffer(pcm, dtype=np.int16).astype(np.float32) / 32768.0
        segments, info = self._model.transcribe(
            audio,
            language=self._language,
            word_timestamps=True,
            vad_filter=False,
            condition_on_previous_text=False,
        )
        words = [
            {
                "word": word.word.strip(),
                "start": round(offset + float(word.start), 2),
                "end": round(offset + float(word.end), 2),
                "confidence": round(min(1.0, max(0.0, float(word.probability))), 3),
            }
            for segment in segments
            for word in segment.words or ()
            if word.word.strip()
        ]
        self.language = str(info.language)
        if not words:
            return None
        return {
            "start": words[0]["start"],
            "end": words[-1]["end"],
            "text": " ".join(str(word["word"]) for word in words),
            "confidence": round(sum(float(word["confidence"]) for word in words) / len(words), 3),
            "words": words,
        }

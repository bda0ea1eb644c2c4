"""The whisper engine's real loading and transcribing code, as far as this machine allows (no model hub is
reachable, and the server never downloads one): on a small CTranslate2 Whisper model of random weights made
here (:mod:`tests.views.tiny_whisper`) it transcribes the speech map's spans through the official MCP client;
its settings are checked at start; and a model directory that is missing, not a CTranslate2 Whisper model, or
one CTranslate2 cannot load is ``unsupported_media`` saying why, never ``internal``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import get_default_environment
from pydantic import ValidationError

from blobstore.config import Settings
from tests.fixtures.server import BLOBSTORE
from tests.mcp.conftest import NAMESPACE
from tests.views.conftest import SPEECH_GAP, SPEECH_SOUNDS, MediaSet, connect
from tests.views.media import spoken_at
from tests.views.tiny_whisper import make_model


def test_the_settings_are_checked_at_start(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="whisper needs transcribe_model"):
        Settings(data_dir=tmp_path, transcribe_engine="whisper")
    with pytest.raises(ValidationError, match="PocketSphinx transcribes en-us only, not 'de'"):
        Settings(data_dir=tmp_path, transcribe_language="de")
    with pytest.raises(ValidationError, match="must be a language code such as en or en-us"):
        Settings(
            data_dir=tmp_path,
            transcribe_engine="whisper",
            transcribe_model=tmp_path,
            transcribe_language="x;",
        )
    settings = Settings(
        data_dir=tmp_path, transcribe_engine="whisper", transcribe_model=tmp_path, transcribe_language="de"
    )
    assert (settings.transcribe_engine, settings.transcribe_language) == ("whisper", "de")


def _model(tmp_path: Path, files: dict[str, bytes]) -> Path:
    model = tmp_path / "model"
    model.mkdir()
    for name, data in files.items():
        (model / name).write_bytes(data)
    return model


@pytest.mark.parametrize(
    ("files", "reason"),
    [
        (None, "does not exist"),
        ({"config.json": b"{}"}, "has no model.bin, tokenizer.json: it is not a CTranslate2 Whisper model"),
        (
            {"model.bin": b"not weights", "config.json": b"{}", "tokenizer.json": b"{}"},
            "could not be loaded",
        ),
    ],
)
async def test_a_model_directory_it_cannot_use_is_unsupported_media_saying_why(
    media_set: MediaSet,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    files: dict[str, bytes] | None,
    reason: str,
) -> None:
    model = _model(tmp_path, files) if files is not None else tmp_path / "nowhere"
    changes: dict[str, Any] = {"transcribe_engine": "whisper", "transcribe_model": model}
    monkeypatch.setattr(media_set, "settings", media_set.settings.model_copy(update=changes))
    uri = f"blobstore://artifacts/{media_set.ids['speech.wav']}"
    async with connect("memory", media_set, request) as client:
        result = await client.call_tool("read_artifact", {"uri": uri, "transcript": True})
        segment = await client.call_tool(
            "read_artifact", {"uri": uri, "start_seconds": 0, "duration_seconds": 2}
        )
    assert result.is_error
    assert isinstance(result.structured_content, dict)
    error = result.structured_content["error"]
    assert error["code"] == "unsupported_media"
    assert reason in error["message"]
    # The sound itself is read as ever.
    assert not segment.is_error


@pytest.mark.parametrize("transport", ["memory", "stdio"])
async def test_a_whisper_model_directory_transcribes_the_speech_it_is_given(
    transport: str,
    media_set: MediaSet,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    model = make_model(tmp_path_factory.mktemp("whisper-model"))
    changes: dict[str, Any] = {"transcribe_engine": "whisper", "transcribe_model": model}
    monkeypatch.setattr(media_set, "settings", media_set.settings.model_copy(update=changes))
    uri = f"blobstore://artifacts/{media_set.ids['speech.wav']}"
    arguments = {"uri": uri, "transcript": True}
    if transport == "memory":
        async with connect(transport, media_set, request) as client:
            result = await client.call_tool("read_artifact", arguments)
    else:  # `blobstore mcp` configured as an operator would, by its environment
        env = {
            **get_default_environment(),
            "BLOBSTORE_TRANSCRIBE_ENGINE": "whisper",
            "BLOBSTORE_TRANSCRIBE_MODEL": str(model),
        }
        data_dir = str(media_set.settings.data_dir)
        params = StdioServerParameters(
            command=BLOBSTORE, args=["mcp", "--data-dir", data_dir, "--namespace", NAMESPACE], env=env
        )
        async with Client(params) as client:
            result = await client.call_tool("read_artifact", arguments)
    assert not result.is_error, result.content
    head = result.content[0]
    assert head.type == "text"
    # The model is English-only (its vocabulary is too small to be multilingual): it says so, as detected.
    assert head.text.startswith("speech.wav, transcript of 0.0-12.908 s of 12.908 s by faster-whisper 1.")
    assert "(en): 2 segments, 2 marked (low confidence)" in head.text
    assert isinstance(result.structured_content, dict)
    view = result.structured_content["view"]
    assert (view["engine"][:15], view["language"]) == ("faster-whisper ", "en")
    # Its words are noise, but each segment lies where a voice is, within the span the detector found.
    for segment, (begins, ends) in zip(view["segments"], spoken_at(SPEECH_SOUNDS, SPEECH_GAP), strict=True):
        assert begins - 0.3 <= segment["start"] < segment["end"] <= ends + 0.3
        assert segment["text"]
        assert 0 <= segment["confidence"] < 0.5

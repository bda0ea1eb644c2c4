"""The whisper engine's real loading code, as far as this machine allows (no model hub is reachable, and the
server never downloads one): its settings are checked at start, and a model directory that is missing, not a
CTranslate2 Whisper model, or one CTranslate2 cannot load is ``unsupported_media`` saying why, through the
official MCP client, never ``internal``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from blobstore.config import Settings
from tests.views.conftest import MediaSet, connect


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

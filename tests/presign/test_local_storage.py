"""The presign settings on storage that is not S3: ignored, and ``serve`` says so when it starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from blobstore.cli import main
from blobstore.cli import serve as serve_module
from blobstore.config import Settings


def test_presign_settings_without_s3_storage_are_listed_as_ignored(tmp_path: Path) -> None:
    local = Settings(data_dir=tmp_path, s3_presign_downloads=True, s3_presign_uploads=True)
    assert list(local.ignored_settings) == ["BLOBSTORE_S3_PRESIGN_DOWNLOADS", "BLOBSTORE_S3_PRESIGN_UPLOADS"]
    on_s3 = Settings(data_dir=tmp_path, storage_url="s3://bucket/p", s3_presign_downloads=True)
    assert on_s3.ignored_settings == {}


def test_the_presign_lifetime_is_bounded(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="s3_presign_seconds"):
        Settings(data_dir=tmp_path, s3_presign_seconds=7 * 24 * 3600)


def test_serve_says_at_start_that_presigning_is_ignored_without_s3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BLOBSTORE_S3_PRESIGN_DOWNLOADS", "true")
    monkeypatch.setenv("BLOBSTORE_S3_PRESIGN_UPLOADS", "true")
    # No ASGI server: serve returns once its start-up checks and messages are done.
    monkeypatch.setitem(serve_module._RUNNERS, "uvicorn", lambda settings: None)
    result = CliRunner().invoke(main, ["serve", "--data-dir", str(tmp_path / "d"), "--server", "uvicorn"])
    assert "BLOBSTORE_S3_PRESIGN_DOWNLOADS is ignored: presigned URLs need S3 storage" in result.output
    assert "BLOBSTORE_S3_PRESIGN_UPLOADS is ignored" in result.output

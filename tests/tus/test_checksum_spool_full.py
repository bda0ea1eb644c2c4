"""tus bodies with ``Upload-Checksum`` are spooled to the system's temporary directory before they reach the
store; that directory filling up is the catalogue's ``storage_full``, like the store's own disk, never an
unmapped ``OSError`` (which the HTTP edge would answer with a 500)."""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from blobstore.checksum_spool import BodyChecksum, ChecksumSpool
from blobstore.errors import StorageFull
from tests.fixtures.smallfs import MiB, small_tmpfs

PIECE = b"x" * (256 * 1024)


async def body(pieces: int) -> AsyncIterator[bytes]:
    for _ in range(pieces):
        yield PIECE


async def test_a_full_temporary_directory_is_storage_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pieces = 16  # 4 MiB into a 1 MiB file system
    checksum = BodyChecksum("sha256", hashlib.sha256(PIECE * pieces).digest())
    with small_tmpfs(tmp_path / "tmp", 1 * MiB) as spool_dir:
        monkeypatch.setattr(tempfile, "tempdir", str(spool_dir))
        with pytest.raises(StorageFull):
            async with ChecksumSpool(threads=2).verified(body(pieces), checksum, limit=8 * MiB):
                pytest.fail("a body that did not fit its spool was replayed")
        assert list(spool_dir.iterdir()) == []  # the spool is an unnamed temporary file, gone with it


async def test_a_body_that_fits_is_replayed_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pieces = 2
    checksum = BodyChecksum("sha256", hashlib.sha256(PIECE * pieces).digest())
    with small_tmpfs(tmp_path / "tmp", 1 * MiB) as spool_dir:
        monkeypatch.setattr(tempfile, "tempdir", str(spool_dir))
        async with ChecksumSpool(threads=2).verified(body(pieces), checksum, limit=8 * MiB) as replayed:
            got = b"".join([piece async for piece in replayed])
    assert got == PIECE * pieces

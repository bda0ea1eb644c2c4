"""The files of path arguments: their names keep an extension tools can go by, their modes hold whatever the
umask, and removing them twice is harmless."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from blobstore.config import Settings
from blobstore.models import Caller
from blobstore.ranges import window
from blobstore.runtime import open_service
from blobstore.service import ArtifactService
from mcp_resources.proxy.argument_files import ArgumentFiles, file_name
from mcp_resources.tools.binary_schema import BinarySite, Form, Key, Slot
from mcp_resources.tools.handles import Located
from tests.handles.conftest import put

CALLER = Caller(namespace="tools")


@pytest.mark.parametrize(
    ("name", "mime_type", "tail"),
    [
        ("photo.jpeg", "image/jpeg", "-photo.jpeg"),  # the name's own extension, when it fits the type
        ("capture", "image/png", "-capture.png"),  # none of its own: the type's
        ("scan.txt", "image/png", "-scan.png"),  # one that contradicts the type: the type's
        ("data.parquet", "application/octet-stream", "-data.parquet"),  # a type that says nothing
        ("notes", "text/plain; charset=utf-8", "-notes.txt"),
        ("speech", "audio/wav", "-speech.wav"),
        ("../../etc/passwd", "text/plain", "-passwd.txt"),
        ("Q3 report (final).pdf", "application/pdf", "-Q3_report_final.pdf"),
        ("a b/ü?*.md", "text/markdown", "-artifact.md"),
        ("", "application/pdf", "-artifact.pdf"),
    ],
)
def test_a_file_name_is_random_readable_and_keeps_a_fitting_extension(
    name: str, mime_type: str, tail: str
) -> None:
    made = file_name(name, mime_type)
    assert re.fullmatch(r"[0-9a-f]{16}-[A-Za-z0-9._-]+", made)
    assert made.endswith(tail)
    assert file_name(name, mime_type) != made


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[ArtifactService]:
    async with open_service(Settings(data_dir=tmp_path / "data")) as svc:
        yield svc


@pytest.fixture
def open_umask() -> Iterator[None]:
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


async def located(service: ArtifactService, data: bytes) -> Located:
    artifact = await put(service, data, "notes.md", "text/markdown")
    _artifact, blob = await service.open_artifact(CALLER, artifact.id)
    slot = Slot({"path": artifact.uri}, "path", "path", BinarySite((Key("path"),), Form.PATH))
    return Located(slot, artifact, blob, window(None, None, artifact.size, artifact.size))


@pytest.mark.usefixtures("open_umask")
async def test_files_are_0600_in_a_new_0700_directory_whatever_the_umask(
    service: ArtifactService, tmp_path: Path
) -> None:
    directory = tmp_path / "incoming"
    files = ArgumentFiles(service, directory)
    path = await files.write(await located(service, b"some notes\n"))
    assert path.parent == directory
    assert path.read_bytes() == b"some notes\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    await files.remove()
    await files.remove()
    assert list(directory.iterdir()) == []


async def test_an_existing_directory_keeps_its_mode(service: ArtifactService, tmp_path: Path) -> None:
    directory = tmp_path / "shared"
    directory.mkdir()
    directory.chmod(0o750)
    files = ArgumentFiles(service, directory)
    await files.write(await located(service, b"x"))
    assert stat.S_IMODE(directory.stat().st_mode) == 0o750
    await files.remove()

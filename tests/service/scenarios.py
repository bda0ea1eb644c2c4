"""Service behaviour that must hold on every storage backend, run by the tests of each."""

from __future__ import annotations

import hashlib
import os

import pytest

from blobstore.errors import ChunkConflict
from blobstore.models import Caller
from blobstore.service import ArtifactService
from tests.fixtures.streams import chunks_of, read_back


async def assert_a_conflicting_chunk_keeps_the_first(
    service: ArtifactService, caller: Caller, chunk: int, size: int
) -> None:
    """A chunk resent with other bytes is a conflict; the upload completes with the bytes first sent."""
    data = os.urandom(size)
    session = await service.uploads.begin(caller, name="c.bin", size=len(data), chunk_size=chunk)
    await service.uploads.put_chunk(caller, session.id, 0, chunks_of(data[:chunk]))
    with pytest.raises(ChunkConflict):
        await service.uploads.put_chunk(caller, session.id, 0, chunks_of(os.urandom(chunk)))
    await service.uploads.put_chunk(caller, session.id, 1, chunks_of(data[chunk:]))
    artifact = await service.uploads.complete(caller, session.id)
    assert artifact.sha256 == hashlib.sha256(data).hexdigest()
    assert await read_back(service, caller, artifact.id) == data

"""Half-written temp files (``tmp/*.part``) of the local store: a file whose writer died goes at the first
cleanup after the grace period, not a whole upload lifetime later; a file a live process is still writing
stays however old it is. The writer is a real child process, killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path

import pytest

import blobstore
from blobstore.cleanup import run_cleanup
from blobstore.runtime import cleanup_parts, open_service
from blobstore.service import ArtifactService
from tests.cleanup.conftest import stack_settings
from tests.cleanup.helpers import GRACE, UPLOAD_TTL, FakeClock
from tests.storage.test_local_durability import CHILD, MiB, wait_for


@pytest.fixture
async def local(
    request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock
) -> AsyncIterator[ArtifactService]:
    settings = stack_settings(request, "local-sqlite", tmp_path / "data")
    async with open_service(settings, migrate=True) as service:
        service.clock.source = clock
        yield service


@pytest.fixture
def writer(local: ArtifactService) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """A child process in the middle of a ``put`` into the service's store: its temp file and the process."""
    root = local.settings.data_dir / "blobs"
    source_root = str(Path(blobstore.__file__).resolve().parents[1])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [source_root, os.environ.get("PYTHONPATH")])),
    }
    with subprocess.Popen(
        [sys.executable, "-c", CHILD, str(root)], stdout=subprocess.PIPE, text=True, env=env
    ) as child:
        try:
            assert child.stdout is not None
            assert child.stdout.readline() == "received\n"
            # The first batch is written while the second is asked for: wait until it is all in the file.
            assert wait_for(lambda: [t.stat().st_size for t in (root / "tmp").glob("*.part")] == [2 * MiB])
            [temp] = list((root / "tmp").glob("*.part"))
            yield child, temp
        finally:
            child.kill()
            child.wait()


def age(path: Path, clock: FakeClock, seconds: float) -> None:
    stamp = (clock() - timedelta(seconds=seconds)).timestamp()
    os.utime(path, (stamp, stamp))


async def temp_files_swept(service: ArtifactService) -> int:
    report = await run_cleanup(cleanup_parts(service), steps=["orphans"])
    return report.step("orphans").details.get("temp_files", 0)


async def test_a_dead_writers_temp_file_goes_at_the_first_cleanup_after_the_grace(
    local: ArtifactService, writer: tuple[subprocess.Popen[str], Path], clock: FakeClock
) -> None:
    child, temp = writer
    child.send_signal(signal.SIGKILL)
    child.wait()
    age(temp, clock, GRACE - 60)
    assert await temp_files_swept(local) == 0
    assert temp.exists()
    age(temp, clock, GRACE + 1)
    assert GRACE + 1 < UPLOAD_TTL
    assert await temp_files_swept(local) == 1
    assert not temp.exists()


async def test_a_temp_file_a_live_process_writes_stays_however_old(
    local: ArtifactService, writer: tuple[subprocess.Popen[str], Path], clock: FakeClock
) -> None:
    child, temp = writer
    age(temp, clock, UPLOAD_TTL + GRACE + 3600)
    assert await temp_files_swept(local) == 0
    assert temp.exists()
    assert child.poll() is None

"""docs/operations.md's "Two replicas on one machine, without compose", run as written: moto's server as the
S3 endpoint, a database made by ``createdb``, two ``blobstore serve`` on two ports, an artifact stored through
one replica and read through the other, the probe line each prints, and the stop."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.fixtures.pg import admin_url, drop_database
from tests.fixtures.ports import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.s3]

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
SECTION = "#### Two replicas on one machine, without compose"
_BLOCK = re.compile(r"```(sh|text)\n(.*?)```", re.DOTALL)
RECIPE_SECONDS = 300


def recipe() -> list[tuple[str, str]]:
    """The section's code blocks, in order: (``sh`` or ``text``, body)."""
    text = GUIDE.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.index("\n#### ", start + len(SECTION))
    return _BLOCK.findall(text[start:end])


def assignments(block: str) -> dict[str, str]:
    """``NAME=value`` pairs of the block of values (``export`` or not)."""
    return dict(re.findall(r"([A-Z][A-Z0-9_]*)=(\S+)", block))


def test_two_replicas_without_compose_run_as_the_guide_writes_them(tmp_path: Path) -> None:
    (first_kind, values), *steps = recipe()
    assert first_kind == "sh"
    documented = assignments(values)
    admin = admin_url()
    ours = {
        "PGHOST": admin.host or "127.0.0.1",
        "PGPORT": str(admin.port or 5432),
        "PGUSER": admin.username or "postgres",
        "AWS_ACCESS_KEY_ID": "try",
        "AWS_SECRET_ACCESS_KEY": "try",
        "AWS_DEFAULT_REGION": "us-east-1",
        "DB": f"blobstore_recipe_{uuid.uuid4().hex[:12]}",
        "S3_PORT": str(free_port()),
        "BUCKET": f"recipe-{uuid.uuid4().hex[:8]}",
        "ONE": str(free_port()),
        "TWO": str(free_port()),
    }
    assert set(documented) == set(ours) - {"PGPORT"}, "the guide's values are the ones this test sets"
    script = "\n".join(body for kind, body in steps if kind == "sh")
    expected = "".join(body for kind, body in steps if kind == "text")
    # The answers the guide shows, with its values in them replaced by this test's.
    for name in ("BUCKET", "S3_PORT"):
        expected = expected.replace(documented[name], ours[name])
    bin_dir = str(Path(sys.executable).parent)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("BLOBSTORE_", "AWS_", "PG")) and key != "PATH"
    }
    env.update(ours, PATH=f"{bin_dir}:/usr/local/bin:/usr/bin:/bin")
    process = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # so that whatever the recipe leaves running can be stopped with it
    )
    try:
        out, err = process.communicate(timeout=RECIPE_SECONDS)
        try:
            os.killpg(process.pid, 0)
            left: str | None = "something the recipe started still runs after its stop"
        except ProcessLookupError:
            left = None
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        drop_database(ours["DB"])
    logs = "".join(f"\n--- {log.name}\n{log.read_text()}" for log in sorted(tmp_path.glob("*.log")))
    assert process.returncode == 0, f"{err}{logs}"
    assert re.match(r"database migrated from empty to \d{4}\n", out), out
    # What the guide shows, in its order.
    shown = expected.splitlines()
    assert [line for line in out.splitlines() if line in shown] == shown, out + logs
    assert "conditional writes yes, UploadPartCopy yes, AbortMultipartUpload yes" in out  # moto has all three
    assert left is None, left
    assert {path.name for path in tmp_path.iterdir() if path.is_dir()} == {"replica-1", "replica-2"}

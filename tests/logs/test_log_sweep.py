"""The run's log sweep (``tests/fixtures/log_sweep.py``) fails a run whose logs hold a registered secret or
payload, and names the file and what was found, never the text: checked on a small project, pytest in a
subprocess, alone and with two ``pytest-xdist`` workers (each sweeps its own logs, the controller decides)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from tests.fixtures.commands import run_pytest

INI = "[pytest]\ntestpaths = checks\naddopts = -p tests.fixtures.log_sweep -p no:cov\n"
SECRET = "bst_" + "A" * 16 + "_" + "S3cr3tS3cr3tS3cr3tS3cr3tS3cr3tS3cr3tS3cr3tX"
CHECKS = f'''\
import base64
import logging
from pathlib import Path

from tests.security import leaks

SECRET = "{SECRET}"


def test_a_server_log_with_a_secret_in_it(tmp_path: Path) -> None:
    leaks.register_secret(SECRET)
    (tmp_path / "server.log").write_text("authorization " + SECRET[len("bst_") + 17 :])


def test_a_logging_record_with_content_in_it() -> None:
    data = b"zz-planted-content-marker:" + bytes(range(256)) * 4
    leaks.register_payload(data)
    logging.getLogger("somewhere").warning("body %s", base64.b64encode(data[200:400]).decode())


def test_clean(tmp_path: Path) -> None:
    leaks.register_payload(b"zz-never-logged-content:" + bytes(range(256)))
    (tmp_path / "quiet.log").write_text("nothing to see")
'''
CLEAN = """\
from pathlib import Path

from tests.security import leaks


def test_clean(tmp_path: Path) -> None:
    leaks.register_secret("bst_" + "B" * 16 + "_" + "C" * 43)
    (tmp_path / "quiet.log").write_text("nothing to see")
"""


def project(root: Path, checks: str) -> Path:
    (root / "pytest.ini").write_text(INI)
    (root / "checks").mkdir()
    (root / "checks" / "test_planted.py").write_text(checks)
    return root


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "two-workers"])
def test_a_run_whose_logs_hold_a_registered_secret_or_payload_fails_and_says_where(
    tmp_path: Path, workers: list[str]
) -> None:
    ran = run_pytest(project(tmp_path, CHECKS), "--basetemp", str(tmp_path / "run"), *workers)
    assert ran.returncode == pytest.ExitCode.TESTS_FAILED, ran.stdout
    assert "3 passed" in ran.stdout
    assert "log sweep: registered secrets or content found in logs" in ran.stdout
    reported = [line for line in ran.stdout.splitlines() if line.startswith(str(tmp_path / "run"))]
    assert any("server.log: token secret" in line for line in reported), ran.stdout
    assert not [line for line in reported if "quiet.log" in line]
    # The in-process log of the test process that logged the content, named by its kind only.
    assert "content base64" in ran.stdout
    assert "S3cr3t" not in ran.stdout
    planted = base64.b64encode((b"zz-planted-content-marker:" + bytes(range(256)) * 4)[200:400]).decode()
    assert planted[:40] not in ran.stdout


def test_a_clean_run_under_two_workers_passes_and_says_what_was_swept(tmp_path: Path) -> None:
    ran = run_pytest(project(tmp_path, CLEAN), "--basetemp", str(tmp_path / "run"), "-n", "2")
    assert ran.returncode == pytest.ExitCode.OK, ran.stdout
    assert "log sweep: nothing registered found in" in ran.stdout
    assert " 1 secrets" in ran.stdout

"""The coverage floor (``tests/fixtures/coverage_floor.py``) fails a run of the whole suite that covers too
little and leaves a run of part of the suite alone: checked on a small project, pytest in a subprocess."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.commands import run_pytest

INI = """\
[pytest]
testpaths = checks
addopts = -p tests.fixtures.coverage_floor --cov=half --cov-branch --cov-report=term
asyncio_default_fixture_loop_scope = function
"""
COVERAGE_RC = "[report]\nfail_under = 80\n"
HALF = "def used():\n    return 1\n\n\ndef unused():\n    return 2\n"
CHECK = """\
from half import used


def test_used():
    assert used() == 1


def test_other():
    pass
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pytest.ini").write_text(INI)
    (tmp_path / ".coveragerc").write_text(COVERAGE_RC)
    (tmp_path / "half.py").write_text(HALF)
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "test_half.py").write_text(CHECK)
    return tmp_path


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "two-workers"])
def test_the_whole_suite_below_the_floor_fails(project: Path, workers: list[str]) -> None:
    ran = run_pytest(project, *workers)
    assert ran.returncode == pytest.ExitCode.TESTS_FAILED, ran.stdout
    assert "2 passed" in ran.stdout
    assert "Required test coverage of 80" in ran.stdout


@pytest.mark.parametrize(
    "args",
    [["checks/test_half.py"], ["-k", "used"], ["-n", "2", "checks/test_half.py"], ["-n", "2", "-k", "used"]],
    ids=["named-path", "deselected-items", "named-path-two-workers", "deselected-items-two-workers"],
)
def test_part_of_the_suite_reports_coverage_without_the_floor(project: Path, args: list[str]) -> None:
    ran = run_pytest(project, *args)
    assert ran.returncode == pytest.ExitCode.OK, ran.stdout
    assert "half.py" in ran.stdout
    assert "Required test coverage" not in ran.stdout


def test_a_floor_given_on_the_command_line_holds_for_part_of_the_suite(project: Path) -> None:
    ran = run_pytest(project, "checks/test_half.py", "--cov-fail-under=90")
    assert ran.returncode == pytest.ExitCode.TESTS_FAILED, ran.stdout
    assert "Required test coverage of 90" in ran.stdout

"""The probes behind docs/performance.md's reading of this machine run as documented and report what
they measured (no speed is asserted)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(*argv: str) -> str:
    result = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_inprocess_reads_reports_the_cpu_of_each_round_and_their_median() -> None:
    out = run("bench/inprocess_reads.py", "--rounds", "2", "--requests", "50")
    found = re.fullmatch(
        r"CPU per 64 KiB range read, in process: rounds ([0-9.]+), ([0-9.]+) µs; median ([0-9.]+) µs\n", out
    )
    assert found is not None, out
    first, second, median = (float(value) for value in found.groups())
    assert 0 < min(first, second) <= median <= max(first, second)


def test_inprocess_uploads_reports_each_upload_and_their_medians(tmp_path: Path) -> None:
    out = run("bench/inprocess_uploads.py", "--uploads", "2", "--size-mib", "3", "--data-dir", str(tmp_path))
    lines = out.splitlines()
    assert len(lines) == 3, out
    seconds = r"wall ([0-9.]+) s, event-loop thread ([0-9.]+) s, process ([0-9.]+) s"
    for line in lines[:2]:
        found = re.fullmatch(f"upload of 3 MiB: {seconds}", line)
        assert found is not None, line
        wall, thread, process = (float(value) for value in found.groups())
        assert 0 < thread <= process
        assert wall > 0
    assert re.fullmatch(f"median: {seconds}", lines[2]), lines[2]
    assert list(tmp_path.iterdir()) == []


def test_first_write_reports_both_writes_and_leaves_no_file(tmp_path: Path) -> None:
    out = run("bench/first_write.py", "--mib", "16", "--dir", str(tmp_path))
    lines = out.splitlines()
    assert [line.split(" write of ")[0] for line in lines] == ["first", "second"]
    for line in lines:
        assert re.fullmatch(r"\w+ write of 16 MiB: wall [0-9.]+ s, CPU [0-9.]+ s \([0-9.]+ s per GiB\)", line)
    assert list(tmp_path.iterdir()) == []


def test_media_length_reports_what_each_file_claims_and_measures() -> None:
    out = run("bench/media_length.py", "--hours", "0.01", "--runs", "1")
    found: dict[str, str] = {}
    for line in out.splitlines()[:5]:
        matched = re.fullmatch(r"(.+): claims [0-9.]+ s, measured ([0-9.]+) s, [0-9.]+ ms", line)
        assert matched is not None, line
        found[matched.group(1)] = matched.group(2)
    assert float(found["whole recording"]) == pytest.approx(36.0, abs=0.1)
    assert float(found["first 50 % of it"]) == pytest.approx(18.0, abs=0.5)
    assert float(found["1 s claiming 10 h"]) == pytest.approx(1.0, abs=0.1)
    assert [line.split(":")[0] for line in out.splitlines()[5:]] == [
        "whole recording, every packet demuxed",
        "whole recording, every frame decoded",
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["bench/inprocess_reads.py", "--requests", "0"], "--requests and --rounds must be at least 1"),
        (["bench/first_write.py", "--mib", "12"], "--mib must be a positive multiple of 8"),
        (["bench/inprocess_uploads.py", "--uploads", "0"], "--uploads and --size-mib must be at least 1"),
    ],
    ids=["inprocess-reads-empty-round", "first-write-partial-piece", "inprocess-uploads-none"],
)
def test_a_probe_refuses_what_it_cannot_measure(argv: list[str], message: str) -> None:
    result = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert result.returncode == 2
    assert message in result.stderr

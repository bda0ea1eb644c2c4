"""The documented ceiling command keeps working: ``bench/ceiling.py --quick`` runs every workload end to end.

Speed is not asserted (the report gives it); this checks that the run finishes and that every row has a figure
for ours, a figure for its counterpart and their ratio, or names the missing tool.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench.test_suite_smoke import table_rows

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.e2e

FIGURE = r"[0-9][0-9,]*(\.[0-9]+)?"

ROWS = {
    "single-request upload (sha256 checked, fsynced), curl -T": "nginx",
    "chunked upload, `blobstore upload --parallel 4`": "nginx",
    "ceiling: the payload written and fsynced on the store's disk (no hashing)": "nginx",
    "full download, curl": "nginx",
    "64 KiB random ranges, wrk -t1 -c4": "wrk",
    "64 KiB random ranges, the bare app's pread as one FastAPI route": "wrk",
    "64 KiB random ranges, the bare app with 100 µs of Python per range (no system call)": "wrk",
    "1 KiB durable uploads, 16 in flight, wrk (Lua: a new body each)": "wrk",
    "1 KiB durable uploads, 16 in flight, httpx": "",
    "peak RSS of `blobstore serve` at start, decoder workers idle": "",
    "peak RSS of `blobstore serve` after the load": "",
}


def test_quick_run_reports_every_row_with_its_ratio(tmp_path: Path) -> None:
    output = tmp_path / "report.md"
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "ceiling.py"), "--quick", "--output", str(output)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    report = output.read_text()
    assert report in result.stdout
    rows = table_rows(report)
    for workload, tool in ROWS.items():
        if tool and workload not in rows:
            assert f"{tool} is not installed" in report, f"no row for {workload!r}"
            continue
        cells = rows[workload]
        assert re.fullmatch(FIGURE, cells[2]), f"{workload}: ours is {cells[2]!r}"
        peer = cells[3].rpartition(" ")[2]
        assert re.fullmatch(FIGURE, peer), f"{workload}: the counterpart is {cells[3]!r}"
        assert re.fullmatch(r"[0-9]+\.[0-9]{2}", cells[4]), f"{workload}: no ratio, {cells[4]!r}"
    assert set(rows) == set(ROWS) - {name for name, tool in ROWS.items() if tool and name not in rows}


def test_only_refuses_an_unknown_workload() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "ceiling.py"), "--quick", "--only", "ranges,sizes"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "unknown workload 'sizes'" in result.stderr

"""The documented benchmark command keeps working: ``bench/run.py --quick`` runs every workload end to end.

Speed is not asserted (the suite reports it); this checks that the run finishes, that every workload produced
a figure for ours, and that a peer is either measured or named as missing in the report.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.e2e

WORKLOADS = (
    "single-request upload (sha256 checked, fsynced)",
    "chunked upload",
    "full download, curl",
    "1 KiB single-request uploads",
    "4 KiB MCP read",
    "1 MiB MCP windows",
    "peak RSS of `blobstore serve`",
)


def table_rows(report: str) -> dict[str, list[str]]:
    rows: dict[str, list[str]] = {}
    for line in report.splitlines():
        if line.startswith("| ") and not line.startswith("| ---") and not line.startswith("| workload"):
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            rows.setdefault(cells[0], cells)
    return rows


def test_quick_run_reports_a_figure_for_every_workload(tmp_path: Path) -> None:
    output = tmp_path / "report.md"
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run.py"), "--quick", "--output", str(output)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    report = output.read_text()
    rows = table_rows(report)
    for workload in WORKLOADS:
        row = next((cells for name, cells in rows.items() if name.startswith(workload)), None)
        assert row is not None, f"no row for {workload!r}"
        assert re.fullmatch(r"[0-9][0-9,]*(\.[0-9]+)?", row[2]), f"{workload}: ours is {row[2]!r}"
    ranges = "64 KiB random ranges, wrk, 4 connections"
    assert ranges in rows or "wrk is not installed" in report
    for peer, missing in (("nginx", "nginx is not installed"), ("docker-registry", "docker-registry is not")):
        measured = any(cells[3].startswith(peer) and cells[3] != peer for cells in rows.values())
        assert measured or missing in report, f"{peer}: neither measured nor reported missing"
    assert "server-filesystem" in rows["4 KiB MCP read (stdio, minimal client), median"][3] or (
        "server-filesystem missing" in report
    )

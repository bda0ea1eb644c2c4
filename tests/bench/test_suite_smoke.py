"""The documented benchmark command keeps working: ``bench/run.py --quick`` runs every workload end to end.

The scale workloads (``cleanup``, ``list``) run on a few hundred artifacts there, so the test stays short.

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
    "ceiling: the payload written and fsynced on the store's disk",
    "single-request upload: server CPU per GiB",
    "chunked upload: server + client CPU per GiB",
    "full download, curl",
    "1 KiB single-request uploads",
    "1 KiB uploads: server + client CPU per upload",
    "4 KiB MCP read",
    "1 MiB MCP windows",
    "peak RSS of `blobstore serve`",
    "ceiling: full download, pathsend of a bare ASGI app",
    "ceiling: upload received and dropped by a bare ASGI app",
    "ceiling: SHA-256 of the payload",
    "ceiling: 1 KiB uploads to a bare ASGI app",
    "ceiling: the minimal MCP client's own decoding",
    "ceiling: 1 MiB windows from a bare stdio server",
    "deep `resources/list` page",
    "cleanup of ",
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
    front = next(cells for name, cells in rows.items() if name.startswith("full download, curl, through"))
    assert re.fullmatch(r"[0-9][0-9,]*", front[2]) or "nginx is not installed" in report, front
    bare_ranges = "ceiling: 64 KiB random ranges, one pread in a bare ASGI app"
    assert bare_ranges in rows or "wrk is not installed" in report
    for peer, missing in (("nginx", "nginx is not installed"), ("docker-registry", "docker-registry is not")):
        measured = any(cells[3].startswith(peer) and cells[3] != peer for cells in rows.values())
        assert measured or missing in report, f"{peer}: neither measured nor reported missing"
    assert "server-filesystem" in rows["4 KiB MCP read (stdio, minimal client), median"][3] or (
        "server-filesystem missing" in report
    )
    for scaled, goal in (("deep `resources/list` page", "≤ 1.5"), ("cleanup of ", "≤ 12")):
        cells = next(cells for name, cells in rows.items() if name.startswith(scaled))
        assert re.fullmatch(r"[0-9]+\.[0-9]+", cells[4]), f"{scaled}: no ratio, {cells[4]!r}"
        assert cells[5] == goal


def test_only_takes_the_scale_workloads_alone(tmp_path: Path) -> None:
    output = tmp_path / "report.md"
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "run.py"),
            "--quick",
            "--only",
            "cleanup,list",
            "--output",
            str(output),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    rows = table_rows(output.read_text())
    assert [name.split(" ")[0] for name in rows] == ["deep", "cleanup"]


def test_only_refuses_an_unknown_workload() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run.py"), "--quick", "--only", "cleanup,lists"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "unknown workload 'lists'" in result.stderr

"""bench/media_args.py runs as documented and reports every case it names (no speed is asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_typed_argument_bench_reports_each_file_and_case() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "bench/media_args.py",
            "--image-mib",
            "1",
            "--hours",
            "0.01",
            "--runs",
            "1",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert set(report["files"]) == {"image", "wav", "mp3"}
    assert 0.9 * 1024 * 1024 < report["files"]["image"] < 1.1 * 1024 * 1024
    cases = [(row["file"], row["case"]) for row in report["rows"]]
    assert cases == [
        (name, case)
        for name, kind in (("image", "image"), ("wav", "audio"), ("mp3", "audio"))
        for case in (
            "FileInput",
            f"{kind} (format sniffed)",
            f"{kind}, facts read: first",
            f"{kind}, facts read: cached",
        )
    ]
    assert all(row["ms"] > 0 and row["python_peak_kib"] >= 0 for row in report["rows"])
    assert report["worker_peak_rss_mib"] > 0

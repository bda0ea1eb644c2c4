"""The JUnit XML report of a test script (``--junit FILE``), the shape CI systems read: one ``testsuite`` per
script, one ``testcase`` per step, a ``failure`` for broken expectations and an ``error`` for a step that
could not run, the step's lines in ``system-out``."""

from __future__ import annotations

import socket
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from blobstore.cli.tester.blocks import new_file
from blobstore.cli.tester.script import Script, StepResult, step_lines


def junit_xml(script: Script, results: Sequence[StepResult], started: datetime) -> bytes:
    suites = ET.Element("testsuites")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=script.name,
        tests=str(len(results)),
        failures=str(sum(1 for r in results if r.outcome == "failed")),
        errors=str(sum(1 for r in results if r.outcome == "error")),
        skipped="0",
        time=f"{sum(r.seconds for r in results):.3f}",
        timestamp=started.astimezone(UTC).isoformat(timespec="seconds"),
        hostname=socket.gethostname(),
    )
    for result in results:
        case = ET.SubElement(
            suite, "testcase", classname=script.name, name=result.step.name, time=f"{result.seconds:.3f}"
        )
        if result.error is not None:
            error = ET.SubElement(case, "error", message=result.error, type="error")
            error.text = result.error
        elif result.failures:
            failure = ET.SubElement(case, "failure", message=result.failures[0], type="expectation")
            failure.text = "\n".join(result.failures)
        out = ET.SubElement(case, "system-out")
        out.text = "\n".join(step_lines(result))
    ET.indent(suites)
    document: bytes = ET.tostring(suites, encoding="utf-8", xml_declaration=True)
    return document + b"\n"


def write_junit(path: Path, script: Script, results: Sequence[StepResult], started: datetime) -> None:
    """Write the report, replacing an earlier one (a CI job writes it on every run)."""
    with new_file(path, force=True) as out:
        out.write(junit_xml(script, results, started))


__all__ = ["junit_xml", "write_junit"]

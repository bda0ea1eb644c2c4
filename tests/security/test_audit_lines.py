"""An audit line's text: the usual line (strings, integers, ``None``) is written without the JSON encoder's
per-call setup, and is byte for byte what that encoder writes; any other value takes the encoder itself."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from blobstore.audit import AuditLog

ENCODE = json.JSONEncoder(separators=(",", ":"), sort_keys=True).encode
"""The encoder the audit log has always written its lines with (``json.dumps`` with these options)."""

TEXT = st.text(st.characters(codec="utf-8"), max_size=40)  # control characters, quotes, non-ASCII
MAYBE_TEXT = st.none() | TEXT
MAYBE_INT = st.none() | st.integers(min_value=-(2**70), max_value=2**70)


class Captured(AuditLog):
    """An audit log whose lines are kept, as written."""

    def __init__(self) -> None:
        super().__init__(None)
        self.lines: list[str] = []

    def _write(self, line: str) -> None:
        self.lines.append(line)


def expected(line: str, fields: dict[str, Any]) -> str:
    """What the encoder writes for ``fields``, with the time the line was given (it is taken inside)."""
    return ENCODE({**fields, "time": json.loads(line)["time"]})


@settings(max_examples=300, deadline=None)
@given(
    actor=TEXT,
    namespace=MAYBE_TEXT,
    action=TEXT,
    result=TEXT,
    artifact_id=MAYBE_TEXT,
    size=MAYBE_INT,
    mime_type=MAYBE_TEXT,
    duration_ms=MAYBE_INT,
)
def test_the_usual_line_is_byte_for_byte_the_encoders(**fields: Any) -> None:
    audit = Captured()
    audit.record(**fields)
    [line] = audit.lines
    assert line == expected(line, fields)


@settings(max_examples=100, deadline=None)
@given(
    size=st.floats(allow_nan=True, allow_infinity=True) | st.booleans(),
    token_id=st.none() | TEXT,
    extra=st.none() | st.dictionaries(TEXT, st.none() | TEXT | st.integers() | st.floats(), max_size=3),
)
def test_other_values_and_extra_fields_are_written_by_the_encoder(
    size: Any, token_id: str | None, extra: dict[str, Any] | None
) -> None:
    audit = Captured()
    audit.record(
        actor="local",
        namespace="default",
        action="read",
        result="ok",
        size=size,
        token_id=token_id,
        extra=extra,
    )
    [line] = audit.lines
    fields: dict[str, Any] = {
        "actor": "local",
        "namespace": "default",
        "action": "read",
        "result": "ok",
        "artifact_id": None,
        "size": size,
        "mime_type": None,
        "duration_ms": None,
    }
    if token_id is not None:
        fields["token_id"] = token_id
    for key, value in (extra or {}).items():
        if key != "time":
            fields.setdefault(key, value)
    assert line == expected(line, fields)


def test_a_line_written_to_the_file_reads_back_as_its_fields(tmp_path: Path) -> None:
    audit = AuditLog(tmp_path / "audit.jsonl")
    audit.record(actor="local", namespace="default", action="read", result="ok", artifact_id="a_x", size=3)
    audit.close()
    [line] = (tmp_path / "audit.jsonl").read_text().splitlines()
    written = json.loads(line)
    assert written["artifact_id"] == "a_x"
    assert written["size"] == 3
    assert written["mime_type"] is None
    assert list(written) == sorted(written)

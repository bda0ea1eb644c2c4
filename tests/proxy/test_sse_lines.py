"""Server-sent events and JSON bodies turned into message lines, however the network splits them.

The reference reads the whole stream at once, as the WHATWG event-stream rules are written (lines split on
CRLF, CR or LF; a leading BOM, comments and fields other than ``data`` and ``event`` ignored; one space after
the colon removed; a blank line dispatches; what is pending at the end discarded). The streaming parser must
give the same bytes for every way of cutting the stream into chunks.
"""

from __future__ import annotations

import json
import re
from typing import Final

from hypothesis import given
from hypothesis import strategies as st

from mcp_resources.proxy.sse_lines import JsonLines, SseLines

BOM: Final = b"\xef\xbb\xbf"


def reference(stream: bytes) -> tuple[bytes, str | None, int | None]:
    """What the parser passes on, the last event id and the reconnection time, from the whole stream."""
    lines = re.split(rb"\r\n|\r|\n", stream.removeprefix(BOM))
    out: list[bytes] = []
    event_type = b""
    data_lines = 0
    foreign = False
    id_buffer: str | None = None
    last_id: str | None = None
    retry: int | None = None

    def data_value(value: bytes) -> None:
        nonlocal data_lines, foreign
        if event_type not in (b"", b"message") and not data_lines:
            foreign = True
        if not foreign:
            out.append(b"\r" * bool(data_lines) + value)
        data_lines += 1

    for index, line in enumerate(lines):
        last = index == len(lines) - 1  # not ended by a line end: only a data value already passed on
        if line.startswith(b":"):
            continue
        name, colon, value = line.partition(b":")
        value = value.removeprefix(b" ")
        if last:
            if colon and name == b"data":
                data_value(value)
            break
        if not line:
            last_id = id_buffer
            if data_lines and not foreign:
                out.append(b"\n")
            event_type, data_lines, foreign = b"", 0, False
        elif name == b"data":
            data_value(value)
        elif name == b"event":
            event_type = value
        elif name == b"id" and b"\0" not in value:
            id_buffer = value.decode()
        elif name == b"retry" and value.isdigit():
            retry = int(value)
    return b"".join(out), last_id, retry


def streamed(stream: bytes, cuts: list[int], parser: SseLines | None = None) -> bytes:
    parser = parser if parser is not None else SseLines()
    out: list[bytes] = []
    start = 0
    for cut in [*sorted(c % (len(stream) + 1) for c in cuts), len(stream)]:
        out.append(parser.feed(stream[start:cut]))
        start = max(start, cut)
    out.append(parser.end())
    return b"".join(out)


VALUE: Final = st.text(st.characters(exclude_characters="\r\n", exclude_categories=["Cs"]), max_size=12).map(
    str.encode
)
LINE: Final = st.one_of(
    VALUE.map(lambda v: b"data:" + v),
    VALUE.map(lambda v: b"data: " + v),
    st.just(b"data"),
    st.sampled_from([b"event: message", b"event:message", b"event", b"event: ping", b"event: " + b"m" * 300]),
    VALUE.map(lambda v: b": " + v),
    VALUE.map(lambda v: b"id: " + v),
    st.just(b"id: a\0b"),
    st.sampled_from([b"retry: 1000", b"retry:250", b"retry: 1s", b"retry"]),
    VALUE.map(lambda v: b"x" * 20 + v),
    st.just(b""),
)
ENDING: Final = st.sampled_from([b"\n", b"\r", b"\r\n"])


@st.composite
def streams(draw: st.DrawFn) -> bytes:
    lines = draw(st.lists(st.tuples(LINE, ENDING), max_size=25))
    head = draw(st.sampled_from([b"", BOM]))
    tail = draw(st.sampled_from([b"", b'data: {"cut', b"data", b": note"]))
    return head + b"".join(line + end for line, end in lines) + tail


@given(streams(), st.lists(st.integers(min_value=0), max_size=12))
def test_any_chunking_of_an_event_stream_gives_what_the_whole_stream_gives(
    stream: bytes, cuts: list[int]
) -> None:
    parser = SseLines()
    passed = streamed(stream, cuts, parser)
    assert (passed, parser.last_event_id, parser.retry_ms) == reference(stream)


@given(st.lists(st.integers(min_value=0), max_size=8))
def test_messages_split_over_data_lines_become_one_json_line_each(cuts: list[int]) -> None:
    first = {"jsonrpc": "2.0", "id": 1, "result": {"text": "a: b\tc", "n": [1, 2]}}
    second = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
    pretty = json.dumps(first, indent=2).replace("\n", "\r\n").encode()
    stream = (
        BOM
        + b": a comment\r\nid: 7\r\nevent: message\r\ndata: "
        + pretty.replace(b"\r\n", b"\r\ndata: ")
        + b"\r\n\r\nevent: ping\ndata: not json\n\ndata:"
        + json.dumps(second).encode()
        + b"\n\n"
    )
    lines = streamed(stream, cuts).split(b"\n")
    assert [json.loads(line) for line in lines[:-1]] == [first, second]
    assert lines[-1] == b""


def test_an_event_the_stream_ends_in_has_no_line_end() -> None:
    parser = SseLines()
    passed = parser.feed(b'event: message\ndata: {"jsonrpc":"2.0",\ndata: "id": 3') + parser.end()
    assert passed == b'{"jsonrpc":"2.0",\r"id": 3'


def test_a_json_body_becomes_one_line_whatever_line_ends_it_has() -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 2, "result": {"a": [1, 2]}}, indent=1).encode()
    lines = JsonLines()
    out = lines.feed(body[:5]) + lines.feed(body[5:]) + lines.end()
    assert out.endswith(b"\n")
    assert out.count(b"\n") == 1
    assert json.loads(out) == json.loads(body)


def test_the_boundary_between_events_is_known_and_the_last_id_and_retry_kept() -> None:
    parser = SseLines()
    parser.feed(b"id: 7\nretry: 250\ndata: {}\n\n")
    assert (parser.at_boundary, parser.last_event_id, parser.retry_ms) == (True, "7", 250)
    parser.feed(b"id: 8\ndata: {")
    assert not parser.at_boundary  # in the middle of an event's data
    assert parser.last_event_id == "7"  # 8 counts once its event is dispatched
    parser.feed(b"}\n")
    assert not parser.at_boundary
    parser.feed(b"\n")
    assert (parser.at_boundary, parser.last_event_id) == (True, "8")
